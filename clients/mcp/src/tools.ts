/**
 * The MCP server's two tools (runs in a user's MCP host): `list_models` and `decide`. Each declares
 * an input and an output schema, both converted from the public contract by the converter the OpenAPI
 * document uses (contract/json-schema.ts), and answers with `structuredContent` that conforms to its
 * output schema, beside the same JSON as text for clients older than MCP 2025-06-18.
 *
 * Each call reads the credentials afresh, from the environment or the file `svc login` saves (the
 * SDK's settings module, with its precedence), never from the call's arguments; a call with unknown
 * or invalid arguments is answered with an error before anything is sent to the service.
 *
 *     const result = await callTool("decide", { state: "charged twice", questions: { refund: { type: "noul" } } }, process.env);
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { DecisionRequest, DecisionResponse } from "../../../contract/decision.ts";
import { formatPath } from "../../../contract/json.ts";
import { jsonSchemaOf } from "../../../contract/json-schema.ts";
import { LIMITS } from "../../../contract/limits.ts";
import { ModelList } from "../../../contract/models.ts";
import { APIError, Client, ConfigurationError, type DecisionRequest as SdkRequest } from "../../sdk-ts/src/index.ts";
import { requireCredentials, resolveSettings, type Env } from "../../sdk-ts/src/settings.ts";

const request = DecisionRequest.out.shape;

/**
 * Arguments of `decide`: the contract's decision request with unknown fields refused; `model` has no
 * fixed default, since an absent one is SVC_DEFAULT_MODEL.
 */
export const DecideArguments = z.strictObject({
  ...request,
  model: request.model.unwrap().optional().describe("alias or release id; default SVC_DEFAULT_MODEL, else svc-shared (see list_models)"),
});

/** `list_models` takes no arguments. */
export const ListModelsArguments = z.strictObject({});

/** Each tool's arguments, checked before anything is sent, and its result, as the contract defines them. */
const SCHEMAS = {
  list_models: { input: ListModelsArguments, output: ModelList },
  decide: { input: DecideArguments, output: DecisionResponse },
} satisfies Record<string, { input: z.ZodType; output: z.ZodType }>;

type ToolName = keyof typeof SCHEMAS;

const DESCRIPTIONS: Record<ToolName, string> = {
  list_models: "List the decision models this API key may use: each release's name, its aliases, release date and description. Pass a name or alias as `model` to `decide`.",
  decide: [
    "Ask typed questions about a state and get probabilities from the decision service's language model.",
    'Question types: "noul" (yes/no; the answer `noul` is the probability of true), "choice" (criteria: option name -> description or null, 2-255 options; the answer names the most probable option and gives every probability),',
    '"score" (criteria: a list of 2-10 levels, level 0 first, none of them null; the answer `score` is the expected zero-based level).',
    'Example: {"state": "I was charged twice", "questions": {"refund": {"type": "noul", "instructions": "Does the customer want money back?"}}}',
  ].join(" "),
};

export const TOOLS: Tool[] = (Object.keys(SCHEMAS) as ToolName[]).map((name) => ({
  name,
  description: DESCRIPTIONS[name],
  inputSchema: jsonSchemaOf(SCHEMAS[name].input, "input") as Tool["inputSchema"],
  outputSchema: jsonSchemaOf(SCHEMAS[name].output, "output") as Tool["outputSchema"],
}));

export const isTool = (name: string): name is ToolName => Object.hasOwn(SCHEMAS, name);

const failed = (message: string): CallToolResult => ({ content: [{ type: "text", text: message }], isError: true });

/** A result as structured content, and as its JSON text for clients that read only `content`. */
const answered = (value: object): CallToolResult => ({ content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: { ...value } });

/** The first problem zod found, as one line naming where. */
function argumentError(tool: string, error: z.ZodError): CallToolResult {
  const issue = error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    return failed(`${tool} refused: unknown argument${issue.keys.length === 1 ? "" : "s"} ${issue.keys.map((key) => JSON.stringify(key.slice(0, 40))).join(", ")}${issue.path.length ? ` in ${formatPath(issue.path)}` : ""}; nothing was sent to the service`);
  }
  return failed(`${tool} refused: ${issue.path.length ? `${formatPath(issue.path)}: ` : ""}${issue.message}; nothing was sent to the service`);
}

/** A client with the settings' key and deployment, or the error result that says how to provide them. */
function client(env: Env): Client | CallToolResult {
  try {
    const settings = resolveSettings(env);
    const { apiKey, baseUrl } = requireCredentials(settings);
    return new Client({ apiKey, baseURL: baseUrl, defaultModel: settings.defaultModel, timeout: LIMITS.toolRequestTimeoutMs });
  } catch (err) {
    if (!(err instanceof ConfigurationError)) throw err;
    return failed(
      `The decision service's settings are not usable: ${err.message}. This server reads them from its environment or from what \`svc login\` saved, ` +
        "never from tool arguments; call the tool again once they are set.",
    );
  }
}

/** Runs one tool call; an unknown tool name is for the caller to refuse (`isTool`). */
export async function callTool(name: ToolName, args: Record<string, unknown> | undefined, env: Env, signal?: AbortSignal): Promise<CallToolResult> {
  const checked = SCHEMAS[name].input.safeParse(args ?? {});
  if (!checked.success) return argumentError(name, checked.error);
  const service = client(env);
  if (!(service instanceof Client)) return service;
  try {
    if (name === "list_models") return answered(await service.models.list({ signal }));
    // The arguments as given (plain JSON), not the parsed form: the SDK writes them as they are.
    return answered(await service.systemOne(args as unknown as SdkRequest, { signal }));
  } catch (err) {
    if (err instanceof APIError) return failed(`The decision service answered with an error: ${err.summary}`);
    throw err;
  }
}
