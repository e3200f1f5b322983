/**
 * The MCP server's two tools (runs in a user's MCP host): `list_models` and `decide`. Each call reads
 * the credentials afresh, from the environment or the file `svc login` saves (the CLI's settings
 * module, with its precedence), never from the call's arguments; a call with unknown or invalid
 * arguments is answered with an error before anything is sent to the service.
 *
 *     const result = await callTool("decide", { state: "charged twice", questions: { refund: { type: "noul" } } }, process.env);
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { formatPath } from "../../../contract/json.ts";
import { LIMITS } from "../../../contract/limits.ts";
import { apiMessage } from "../../cli/src/errors.ts";
import { APIError, Client, type DecisionRequest } from "../../cli/src/sdk.ts";
import { resolveSettings, SettingsError, type Env } from "../../cli/src/settings.ts";
import { DecideArguments, jsonSchemaOf, ListModelsArguments } from "./schema.ts";
import type { z } from "zod";

/** What a call without a key answers: how to provide one. */
export const NO_KEY =
  "No API key is configured for the decision service. Sign in with `svc login --api-key` in a terminal (it saves the key to ~/.svc/config.json, or SVC_CONFIG_PATH), " +
  "or set SVC_API_KEY (and SVC_BASE_URL) in this MCP server's environment; then call the tool again. Keys are never taken from tool arguments.";

export const TOOLS: Tool[] = [
  {
    name: "list_models",
    description: "List the decision models this API key may use: each release's name, its aliases, release date and description. Pass a name or alias as `model` to `decide`.",
    inputSchema: jsonSchemaOf(ListModelsArguments) as Tool["inputSchema"],
  },
  {
    name: "decide",
    description: [
      "Ask typed questions about a state and get probabilities from the decision service's language model.",
      'Question types: "noul" (yes/no; the answer `noul` is the probability of true), "choice" (criteria: option name -> description or null, 2-255 options; the answer names the most probable option and gives every probability),',
      '"score" (criteria: a list of 2-10 levels, level 0 first; the answer `score` is the expected zero-based level).',
      'Example: {"state": "I was charged twice", "questions": {"refund": {"type": "noul", "instructions": "Does the customer want money back?"}}}',
    ].join(" "),
    inputSchema: jsonSchemaOf(DecideArguments) as Tool["inputSchema"],
  },
];

const text = (value: string, isError = false): CallToolResult => ({ content: [{ type: "text", text: value }], ...(isError ? { isError: true } : {}) });

/** The first problem zod found, as one line naming where. */
function argumentError(tool: string, error: z.ZodError): CallToolResult {
  const issue = error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    return text(`${tool} refused: unknown argument${issue.keys.length === 1 ? "" : "s"} ${issue.keys.map((key) => JSON.stringify(key.slice(0, 40))).join(", ")}${issue.path.length ? ` in ${formatPath(issue.path)}` : ""}; nothing was sent to the service`, true);
  }
  return text(`${tool} refused: ${issue.path.length ? `${formatPath(issue.path)}: ` : ""}${issue.message}; nothing was sent to the service`, true);
}

function client(env: Env): Client | CallToolResult {
  let settings;
  try {
    settings = resolveSettings(env);
  } catch (err) {
    if (err instanceof SettingsError) return text(`The decision service's settings are not usable: ${err.message}`, true);
    throw err;
  }
  if (settings.apiKey === undefined) return text(NO_KEY, true);
  if (settings.baseUrl === undefined) {
    return text("No base URL is configured for the decision service: set SVC_BASE_URL to the service's address (without /v1/...), or sign in with `svc login --api-key --base-url URL`.", true);
  }
  return new Client({ apiKey: settings.apiKey, baseURL: settings.baseUrl, defaultModel: settings.defaultModel, timeout: LIMITS.toolRequestTimeoutMs });
}

function failure(err: unknown): CallToolResult {
  if (err instanceof APIError) return text(`The decision service answered with an error: ${apiMessage(err)}`, true);
  throw err;
}

/** Runs one tool call; an unknown tool name is for the caller to refuse. */
export async function callTool(name: string, args: Record<string, unknown> | undefined, env: Env, signal?: AbortSignal): Promise<CallToolResult> {
  if (name === "list_models") {
    const checked = ListModelsArguments.safeParse(args ?? {});
    if (!checked.success) return argumentError(name, checked.error);
    const service = client(env);
    if (!(service instanceof Client)) return service;
    try {
      const { models } = await service.models.list({ signal });
      return { content: [{ type: "text", text: JSON.stringify({ models }) }], structuredContent: { models } };
    } catch (err) {
      return failure(err);
    }
  }
  const checked = DecideArguments.safeParse(args ?? {});
  if (!checked.success) return argumentError(name, checked.error);
  const service = client(env);
  if (!(service instanceof Client)) return service;
  try {
    // The arguments as given (plain JSON), not the parsed form: the SDK writes them as they are.
    const response = await service.systemOne(args as unknown as DecisionRequest, { signal });
    const { _request_id: _id, ...body } = response;
    return { content: [{ type: "text", text: JSON.stringify(body) }], structuredContent: body };
  } catch (err) {
    return failure(err);
  }
}
