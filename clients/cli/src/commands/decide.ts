/**
 * `svc decide` (runs in a user's terminal): one real-time decision.
 *
 *     svc decide --state 'I was charged twice' --questions '{"refund":{"type":"noul"}}'
 *     svc decide --state @ticket.json --questions @questions.json --model svc-shared --json
 *     cat ticket.txt | svc decide --state - --questions @questions.json
 *     svc decide --body @request.json --timeout 120
 *
 * The request is checked with the contract's schema before anything is sent (exit 2 when it is not
 * valid), with key order kept: answers and options are shown in the order the request gave them.
 */
import { DecisionRequest } from "../../../../contract/decision.ts";
import { formatPath, stringifyJson, type Json, type JsonMap } from "../../../../contract/json.ts";
import { LIMITS } from "../../../../contract/limits.ts";
import type { Command, Parsed } from "../command.ts";
import { UsageError } from "../errors.ts";
import { checkOneStdin, jsonOf, readInput, stateOf } from "../inputs.ts";
import { renderDecision, usageLine } from "../render.ts";
import type { DecisionRequest as SdkRequest, DecisionResponse } from "../sdk.ts";

const DEFAULT_TIMEOUT_S = LIMITS.toolRequestTimeoutMs / 1000;

export function timeoutMs(value: string | undefined): number {
  if (value === undefined) return LIMITS.toolRequestTimeoutMs;
  const seconds = Number(value);
  if (!/^\s*\d+(\.\d+)?\s*$/.test(value) || !(seconds > 0) || seconds > 24 * 3600) throw new UsageError("--timeout is a number of seconds, more than 0");
  return seconds * 1000;
}

const isMap = (value: Json): value is JsonMap => value instanceof Map;

/** The first problem the contract finds, as one line naming where it is. */
function invalid(option: string, error: { issues: Array<{ path: PropertyKey[]; message: string }> }): UsageError {
  const issue = error.issues[0]!;
  const where = issue.path.length > 0 ? ` at ${formatPath(issue.path)}` : "";
  return new UsageError(`${option}: invalid request${where}: ${issue.message}`);
}

/** The request as the options give it, with its JSON objects as ordered Maps. */
async function buildRequest(ctx: Parameters<Command["run"]>[0], values: Parsed["values"]): Promise<JsonMap> {
  const state = values.state as string | undefined;
  const questions = values.questions as string | undefined;
  const body = values.body as string | undefined;
  if (body !== undefined && (state !== undefined || questions !== undefined)) throw new UsageError("--body is a whole request: it cannot be combined with --state or --questions");
  if (body === undefined && (state === undefined || questions === undefined)) throw new UsageError("give --state and --questions, or --body @request.json");
  checkOneStdin({ "--state": state, "--questions": questions });

  let request: JsonMap;
  if (body !== undefined) {
    const json = jsonOf("--body", await readInput("--body", body, ctx));
    if (!isMap(json)) throw new UsageError("--body must be a JSON object (a decision request)");
    request = new Map(json);
  } else {
    const stateValue = stateOf("--state", await readInput("--state", state!, ctx));
    const questionsValue = jsonOf("--questions", await readInput("--questions", questions!, ctx));
    if (!isMap(questionsValue)) throw new UsageError("--questions must be a JSON object: question id -> question");
    request = new Map<string, Json>([
      ["state", stateValue],
      ["questions", questionsValue],
    ]);
  }
  const model = (values.model as string | undefined) ?? (typeof request.get("model") === "string" ? (request.get("model") as string) : ctx.settings().defaultModel);
  request.set("model", model);
  const checked = DecisionRequest.safeParse(request);
  if (!checked.success) throw invalid(body !== undefined ? "--body" : "--questions", checked.error);
  if (Buffer.byteLength(stringifyJson(request)) > LIMITS.decisionBodyBytes) throw new UsageError(`the request is larger than the ${LIMITS.decisionBodyBytes / (1024 * 1024)} MiB a decision may be`);
  return request;
}

export const decide: Command = {
  name: "decide",
  summary: "Ask typed questions about a state and print the answers",
  usage: "svc decide --state TEXT|JSON|@FILE|- --questions JSON|@FILE|- [options]\n       svc decide --body @FILE|- [options]",
  description: [
    "--state is text or JSON (an object or an array); @FILE reads a UTF-8 file and - reads standard",
    "input (only one option may). --questions is a JSON object: question id -> question, for example",
    '  {"refund": {"type": "noul", "instructions": "Does the customer want money back?"},',
    '   "topic": {"type": "choice", "criteria": {"billing": null, "bug": "a defect"}},',
    '   "severity": {"type": "score", "criteria": ["low", "medium", "high"]}}',
    "--body takes a whole request ({model, state, questions}) instead. Each input is at most 1 MiB.",
    "",
    "Answers go to standard output: each with its probabilities and a bar per option (or the response",
    "JSON with --json); the model used and the tokens go to standard error. Ctrl-C aborts the request",
    "(exit 130); the service may still have run it.",
  ].join("\n"),
  options: {
    state: { type: "string", value: "TEXT|JSON|@FILE|-", help: "what the questions are about" },
    questions: { type: "string", value: "JSON|@FILE|-", help: "question id -> question (a JSON object)" },
    body: { type: "string", value: "@FILE|-", help: "a whole decision request instead of --state and --questions" },
    model: { type: "string", value: "NAME", help: "alias or release id (default SVC_DEFAULT_MODEL, else svc-shared)" },
    timeout: { type: "string", value: "SECONDS", help: `how long to wait for the answer (default ${DEFAULT_TIMEOUT_S})` },
    json: { type: "boolean", help: "print the response JSON" },
  },
  async run(ctx, { values }) {
    const timeout = timeoutMs(values.timeout as string | undefined);
    const request = await buildRequest(ctx, values);
    const client = ctx.client();
    // The top level as a plain object (the SDK adds its fields to it); the Maps inside keep their order.
    const body = Object.fromEntries(request) as unknown as SdkRequest;
    const response = await client.systemOne(body, { timeout, signal: ctx.signal });
    const questions = request.get("questions") as JsonMap;
    const order = [...questions.keys()];
    if (values.json) {
      ctx.stdout.write(`${stringifyJson(inRequestOrder(response, order))}\n`);
    } else {
      const options = new Map<string, string[]>();
      for (const [id, question] of questions) {
        const criteria = question instanceof Map ? question.get("criteria") : undefined;
        if (criteria instanceof Map) options.set(id, [...criteria.keys()]);
      }
      ctx.stdout.write(renderDecision(response, order, options));
      ctx.status(usageLine(response, response._request_id ?? null));
    }
  },
};

/** The response with its answers in the request's question order (JSON objects put "2" before "b"). */
function inRequestOrder(response: DecisionResponse, order: string[]): unknown {
  const answers = response.answers as Record<string, unknown>;
  const ids = [...order.filter((id) => id in answers), ...Object.keys(answers).filter((id) => !order.includes(id))];
  return { ...response, answers: new Map(ids.map((id) => [id, answers[id]])) };
}
