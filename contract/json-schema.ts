/**
 * The one converter from the contract's zod schemas to JSON Schema (draft 2020-12): the OpenAPI
 * document (contract/openapi.ts) and the MCP server's tool schemas (clients/mcp) both publish what it
 * writes, so a rule such as "a score level is never null" reads the same everywhere.
 *
 *     jsonSchemaOf(DecisionRequest, "input");    // the body as a client sends it (defaults optional)
 *     jsonSchemaOf(DecisionResponse, "output");  // the body as the service writes it
 *
 * The wire is plain JSON, while some parsed forms are not: a map keyed by client names (questions,
 * options, probabilities) is a `Map` (contract/fields.ts `orderedMap`), written here as a JSON object
 * whose key order is meaningful, and a few values are `z.custom` checks (the state, any JSON value),
 * whose JSON Schema is given in OVERRIDES below. A new custom type fails conversion until it is added
 * there. An object that drops unknown fields on parse says nothing of additional properties, so a
 * client stays free to accept fields added later; a strict object (unknown fields refused) says so.
 */
import { z } from "zod";
import { ChoiceQuestion, DecisionRequest, NoulQuestion, Questions, ScoreQuestion, State } from "./decision.ts";
import { ImageAnswers, ImageQuestions } from "./images.ts";
import { JsonValue } from "./fields.ts";
import { LIMITS } from "./limits.ts";

export type JsonSchema = Record<string, unknown>;
/** Which side of the wire: requests as clients send them, responses as the service writes them. */
export type Io = "input" | "output";

/** A `z.custom` check's function, shared by its optional and described copies. */
const customOf = (schema: { _zod: { def: object } }) => (schema._zod.def as { fn?: unknown }).fn;
const Instructions = NoulQuestion.shape.instructions.unwrap();

/**
 * What zod cannot say of a contract schema, by schema, and for a `z.custom` check by its check
 * function: `replace` stands in for zod's output (custom checks, and fields this service refuses
 * whatever their value), `add` is merged into it (the bounds the contract checks with `.refine`, from
 * the same LIMITS).
 */
const OVERRIDES = new Map<unknown, { replace: JsonSchema } | { add: JsonSchema }>([
  [customOf(State), { replace: { type: ["object", "array", "string"], description: "The state the questions are about: a JSON object, an array or text." } }],
  [customOf(Instructions), { replace: { type: ["string", "object", "array", "null"], description: "Text, a JSON object or array, or null." } }],
  [customOf(JsonValue), { replace: { description: "Any JSON value." } }],
  [Questions, { add: { minProperties: 1 } }],
  [ChoiceQuestion.shape.criteria, { add: { minProperties: LIMITS.choiceOptions.min, maxProperties: LIMITS.choiceOptions.max } }],
  [ImageQuestions, { add: { minProperties: 1, maxProperties: 1 } }],
  [ImageAnswers, { add: { minProperties: LIMITS.imageOutcomes.min, maxProperties: LIMITS.imageOutcomes.max } }],
  [ScoreQuestion.shape.criteria.element, { add: { not: { type: "null" }, description: "A level: text or structured JSON, never null." } }],
  [
    DecisionRequest.out.shape.images,
    { replace: { not: {}, description: "Image decisions are not enabled on this service: a request with `images` is refused (422 `invalid_request`)." } },
  ],
]);

/** JSON Schema (draft 2020-12, without `$schema`) of one contract schema, on the given side of the wire. */
export function jsonSchemaOf(schema: z.ZodType, io: Io): JsonSchema {
  const converted = z.toJSONSchema(schema, {
    io,
    reused: "inline",
    unrepresentable: (ctx) => {
      const def = ctx.zodSchema._zod.def as unknown as { type: string; keyType?: z.ZodType; valueType?: z.ZodType };
      if (def.type === "map" && def.keyType && def.valueType) {
        const keys = jsonSchemaOf(def.keyType, io);
        return {
          type: "object",
          description: "A JSON object whose key order is meaningful: the service reads and writes its keys in order.",
          ...(Object.keys(keys).length > 1 ? { propertyNames: keys } : {}),
          additionalProperties: jsonSchemaOf(def.valueType, io),
        };
      }
      if (def.type === "custom") {
        const known = OVERRIDES.get(customOf(ctx.zodSchema));
        if (known && "replace" in known) return { ...known.replace };
        throw new Error(`json-schema: no JSON Schema for the custom type at ${ctx.path.join(".") || "the top"}; add it to OVERRIDES`);
      }
      return undefined;
    },
    override: (ctx) => {
      const def = ctx.zodSchema._zod.def as { type: string; catchall?: unknown };
      const json = ctx.jsonSchema as JsonSchema;
      const known = OVERRIDES.get(ctx.zodSchema);
      if (known && "replace" in known) for (const key of Object.keys(json)) delete json[key];
      if (known) Object.assign(json, "replace" in known ? known.replace : known.add);
      // An object that drops unknown fields (z.object) is not a promise that none will ever be added.
      if (def.type === "object" && def.catchall === undefined && json.additionalProperties === false) delete json.additionalProperties;
      // zod bounds every integer to the safe range; on the wire that says nothing.
      if (json.type === "integer") {
        if (json.minimum === Number.MIN_SAFE_INTEGER) delete json.minimum;
        if (json.maximum === Number.MAX_SAFE_INTEGER) delete json.maximum;
      }
    },
  }) as JsonSchema;
  delete converted.$schema;
  return converted;
}
