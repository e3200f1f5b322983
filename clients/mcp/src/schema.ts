/**
 * The MCP tools' argument schemas, derived from the public contract (runs in a user's MCP host):
 * the zod schema that checks a `decide` call is the contract's DecisionRequest with unknown fields
 * refused, and the JSON Schema the tools listing publishes is converted from that same zod schema.
 *
 * zod's converter cannot see inside three kinds of contract schema, which are filled in here: the
 * ordered maps (questions, choice criteria; JSON objects on the wire), the custom checks (state,
 * instructions, any JSON value), and the count refinements (2-255 options, at least one question).
 */
import { z } from "zod";
import { ChoiceQuestion, DecisionRequest, NoulQuestion, Questions, State } from "../../../contract/decision.ts";
import { JsonValue } from "../../../contract/fields.ts";
import { LIMITS } from "../../../contract/limits.ts";

type JsonSchema = Record<string, unknown>;

const request = DecisionRequest.out.shape;
// Described copies are new schema objects: the tables below are keyed by these.
const state = State.describe("what the questions are about: text, a JSON object or a JSON array");
const questions = Questions.describe("question id -> question; answers come back under the same ids");

/** Arguments of `decide`: the decision request's fields, nothing else; `model` defaults to SVC_DEFAULT_MODEL. */
export const DecideArguments = z.strictObject({
  ...request,
  model: request.model.unwrap().optional().describe("alias or release id; default SVC_DEFAULT_MODEL, else svc-shared (see list_models)"),
  state,
  questions,
  images: request.images.describe("finalized image asset ids; only where the service's image vertical is on"),
});

/** `list_models` takes no arguments. */
export const ListModelsArguments = z.strictObject({});

const anyJson: JsonSchema = { description: "any JSON value" };
const KNOWN = new Map<unknown, JsonSchema>([
  [state, { anyOf: [{ type: "string" }, { type: "object" }, { type: "array" }] }],
  [NoulQuestion.shape.instructions.unwrap(), { anyOf: [{ type: "string" }, { type: "object" }, { type: "array" }, { type: "null" }], description: "what to decide (text or JSON)" }],
  [JsonValue, anyJson],
]);
/** Counts the contract checks with refinements, which JSON Schema says with min/maxProperties. */
const COUNTS = new Map<unknown, JsonSchema>([
  [ChoiceQuestion.shape.criteria, { minProperties: LIMITS.choiceOptions.min, maxProperties: LIMITS.choiceOptions.max, description: "option name -> description (or null); the order is the tie order" }],
  [questions, { minProperties: 1 }],
]);

interface ZodInternals {
  _zod: { def: { type: string; keyType?: z.ZodType; valueType?: z.ZodType; in?: z.ZodType; out?: z.ZodType } };
}

/** The JSON Schema of a contract schema, without `$schema`, as MCP's inputSchema wants it. */
export function jsonSchemaOf(schema: z.ZodType): JsonSchema {
  const converted = z.toJSONSchema(schema, {
    io: "input",
    unrepresentable: "any",
    override: ({ zodSchema, jsonSchema }) => {
      const target = jsonSchema as JsonSchema;
      const def = (zodSchema as unknown as ZodInternals)._zod.def;
      const known = KNOWN.get(zodSchema);
      if (known) Object.assign(target, known);
      const map = def.type === "map" ? def : def.type === "pipe" && def.out ? (def.out as unknown as ZodInternals)._zod.def : undefined;
      if (map?.type === "map" && map.keyType && map.valueType) {
        Object.assign(target, { type: "object", propertyNames: jsonSchemaOf(map.keyType), additionalProperties: jsonSchemaOf(map.valueType) });
      }
      const counts = COUNTS.get(zodSchema);
      if (counts) Object.assign(target, counts);
    },
  }) as JsonSchema;
  delete converted.$schema;
  return converted;
}
