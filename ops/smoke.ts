/**
 * The deployment smoke test (runs on an operator's machine, with Bun, against any deployment): proves
 * health, key issue, a decision, a small batch and key revocation, one line per step on stdout.
 *
 *     SVC_USER_TOKEN=$(npm run -s user-token) npm run smoke -- --base-url http://127.0.0.1:8787
 *     npm run smoke -- --base-url https://decisions.example.com --user-token-file token.txt --model svc-shared
 *
 * The user token (of the identity provider) comes from SVC_USER_TOKEN or --user-token-file (`-` reads
 * stdin), never from an argument, since arguments land in shell history. Neither it nor the API key
 * made for the run is ever printed, not even in part: the key is named by its name, not its id (which
 * is part of the secret). The key is revoked however the steps before went. With METRICS_SECRET (the
 * operator's read-only secret) in the environment, the health step names every link; without it, it
 * sees only whether the service is up, as anyone does.
 * Exit: 0 all ok, 1 a step failed, 2 bad usage.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { APIError, APIUserAbortError, choice, Client, noul, type Answer, type Batch, type Question, SHARED_ALIAS } from "../clients/sdk-ts/src/index.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { HealthReport, HealthStatus } from "../contract/health.ts";
import { CreatedKey, KeyMetadata } from "../contract/keys.ts";
import { checkServiceUrl } from "../contract/urls.ts";

const USAGE = `Usage: npm run smoke -- --base-url URL [--user-token-file PATH|-] [--model NAME] [--timeout SECONDS]

  --base-url URL          the deployment (https://..., or http:// on loopback)
  --user-token-file PATH  file holding a user access token (- for stdin); else SVC_USER_TOKEN
  --model NAME            model of the decision and the batch (default: the SDK's, svc-shared)
  --timeout SECONDS       deadline of the whole batch step (default 300)
`;

/** The HTTP calls made here without the SDK (health, key management) each get this long. */
const CALL_MS = 30_000;
const QUESTIONS = { money: noul("Is this about money?"), topic: choice(["billing", "shipping", "bug"]) } satisfies Record<string, Question>;

class UsageError extends Error {}
/** A step's failure, already worded for the operator. */
class StepFailed extends Error {}

/** Once the key exists, Ctrl-C stops the decision or the batch so that the key is still revoked. */
const interrupt = new AbortController();

const OPTIONS = {
  "base-url": { type: "string" },
  "user-token-file": { type: "string" },
  model: { type: "string", default: SHARED_ALIAS },
  timeout: { type: "string", default: "300" },
  help: { type: "boolean", short: "h" },
} as const;

function readOptions(argv: string[]) {
  let values: ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>["values"];
  try {
    values = parseArgs({ args: argv, options: OPTIONS, strict: true }).values;
  } catch (err) {
    // parseArgs repeats what was typed (`--user-token=...` would echo a token): name the option only.
    const option = /'(--?[A-Za-z0-9-]+)/.exec((err as Error).message)?.[1];
    throw new UsageError(option ? `cannot read option ${option}` : "cannot read the arguments");
  }
  if (values.help) return null;
  if (!values["base-url"]) throw new UsageError("--base-url is required");
  let url: URL;
  try {
    url = checkServiceUrl(values["base-url"], "base");
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (url.username || url.password || url.search || url.hash) throw new UsageError("base URL must not hold credentials, a query or a fragment");
  const timeout = Number(values.timeout);
  if (!(timeout > 0)) throw new UsageError("--timeout is a positive number of seconds");
  const file = values["user-token-file"];
  let token = process.env.SVC_USER_TOKEN ?? "";
  if (file !== undefined) {
    try {
      token = readFileSync(file === "-" ? 0 : file, "utf8");
    } catch (err) {
      throw new UsageError(`cannot read --user-token-file: ${(err as NodeJS.ErrnoException).code ?? "unreadable"}`);
    }
  }
  token = token.trim();
  if (!token) throw new UsageError("no user token: set SVC_USER_TOKEN or pass --user-token-file PATH (- for stdin)");
  return { baseUrl: url.href.replace(/\/+$/, ""), token, model: values.model, timeoutMs: timeout * 1000 };
}

/** Prints `secret` nowhere: every printed text goes through this. */
let secrets: string[] = [];
const scrub = (text: string) => secrets.reduce((out, secret) => out.replaceAll(secret, "[redacted]"), text);
const say = (line: string) => console.log(scrub(line));

/** Runs one step, prints its line (status, name, duration, detail) and returns its value. */
async function step<T>(name: string, run: () => Promise<{ value: T; detail: string }>): Promise<T> {
  const started = performance.now();
  const line = (status: string, detail: string) => say(`${status.padEnd(4)} ${name.padEnd(9)} ${String(Math.round(performance.now() - started)).padStart(6)} ms  ${detail}`);
  try {
    const { value, detail } = await run();
    line("ok", detail);
    return value;
  } catch (err) {
    line("FAIL", reason(err));
    throw new StepFailed(name);
  }
}

function reason(err: unknown): string {
  if (err instanceof StepFailed) return err.message;
  if (err instanceof APIError && err.status !== undefined) return `the service answered ${err.status} ${err.code ?? ""}: ${err.message}`;
  const cause = (err as Error).cause instanceof Error ? `: ${((err as Error).cause as Error).message}` : "";
  return `${(err as Error).message}${cause}`;
}

/** One HTTP call without the SDK; a status other than `expected` fails the step with the service's message. */
async function call(url: string, init: { method?: string; token?: string; body?: unknown }, expected: number): Promise<unknown> {
  const headers: Record<string, string> = init.body === undefined ? {} : { "content-type": "application/json" };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  let res: Response;
  try {
    // Redirects are not followed, so the token goes to no other address.
    res = await fetch(url, { method: init.method ?? "GET", headers, body: init.body === undefined ? undefined : JSON.stringify(init.body), redirect: "manual", signal: AbortSignal.timeout(CALL_MS) });
  } catch (err) {
    throw new StepFailed(`cannot reach ${new URL(url).origin}: ${reason(err)}`);
  }
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  if (res.status === expected) return body;
  const envelope = ErrorEnvelope.safeParse(body);
  throw new StepFailed(`the service answered ${res.status}${envelope.success ? ` ${envelope.data.error.code}: ${envelope.data.error.message}` : ""}`);
}

/** Throws unless every answer has its question's type and well-formed probabilities. */
function checkAnswers(answers: Record<string, Answer>, questions: Record<string, Question>): void {
  for (const [id, question] of Object.entries(questions)) {
    const answer = answers[id];
    if (answer?.type !== question.type) throw new StepFailed(`answer ${id} is missing or not a ${question.type} answer`);
    if (answer.type === "noul" && !(answer.noul >= 0 && answer.noul <= 1)) throw new StepFailed(`answer ${id}: noul ${answer.noul} is not a probability`);
    if (answer.type !== "noul") {
      const sum = Object.values(answer.probabilities).reduce((a, b) => a + b, 0);
      if (Math.abs(sum - 1) > 0.01) throw new StepFailed(`answer ${id}: probabilities sum to ${sum}`);
    }
  }
}

/** Runs the steps; returns null when all passed, else what went wrong, in a sentence. */
async function smoke({ baseUrl, token, model, timeoutMs }: NonNullable<ReturnType<typeof readOptions>>): Promise<string | null> {
  // The operator's secret, when given, is the first of a rotation list (the newest).
  const operator = process.env.METRICS_SECRET?.split(",")[0]?.trim() || null;
  secrets = operator ? [token, operator] : [token];
  const name = `smoke ${new Date().toISOString()}`;
  let key: CreatedKey;
  try {
    await step("health", async () => {
      if (!operator) {
        if (HealthStatus.parse(await call(`${baseUrl}/health`, {}, 200)).status !== "ok") throw new StepFailed("down");
        return { value: null, detail: "up (METRICS_SECRET in the environment names every link)" };
      }
      const report = HealthReport.parse(await call(`${baseUrl}/health`, { token: operator }, 200));
      const down = report.links.filter((link) => !link.ok);
      if (report.status !== "ok" || down.length > 0) throw new StepFailed(`down: ${down.map((link) => link.name).join(", ")}`);
      return { value: null, detail: report.links.map((link) => link.name).join(", ") };
    });
    key = await step("key", async () => {
      const created = CreatedKey.parse(await call(`${baseUrl}/v1/keys`, { method: "POST", token, body: { name } }, 201));
      // The id is part of the secret string, so it is kept out of the output too.
      secrets = [...secrets, created.secret, created.id];
      return { value: created, detail: `created "${name}"` };
    });
  } catch (err) {
    if (err instanceof StepFailed) return `failed at ${err.message}; no later step was attempted`;
    throw err;
  }
  // A second Ctrl-C ends the process as usual.
  process.once("SIGINT", () => interrupt.abort(new Error("interrupted")));
  let failed: string | null = null;
  let revoked = false;
  try {
    await useKey(new Client({ apiKey: key.secret, baseURL: baseUrl, defaultModel: model }), timeoutMs);
  } catch (err) {
    if (!(err instanceof StepFailed)) throw err;
    failed = err.message;
    say(`     revoking the smoke key after the failed ${failed} step`);
  } finally {
    revoked = await revoke(baseUrl, token, key, name);
  }
  if (!revoked) return `${failed ? `failed at ${failed}; ` : ""}the key "${name}" may still be active: revoke it by hand (its id is in GET /v1/keys)`;
  return failed ? `failed at ${failed}; the smoke key was revoked` : null;
}

/** Revokes the key with the user token and proves it refused; false when either did not happen. */
async function revoke(baseUrl: string, token: string, key: CreatedKey, name: string): Promise<boolean> {
  try {
    await step("revoke", async () => {
      KeyMetadata.parse(await call(`${baseUrl}/v1/keys/${key.id}/revoke`, { method: "POST", token, body: {} }, 200));
      await call(`${baseUrl}/v1/models`, { token: key.secret }, 401).catch((err: unknown) => {
        throw new StepFailed(`revoked, but the key is not refused: ${reason(err)}`);
      });
      return { value: null, detail: `"${name}" revoked and refused (401)` };
    });
    return true;
  } catch (err) {
    if (err instanceof StepFailed) return false;
    throw err;
  }
}

/** The steps that use the key: one decision, then one small batch run to its end. */
async function useKey(client: Client, timeoutMs: number): Promise<void> {
  await step("decision", async () => {
    const reply = await client.systemOne({ state: { ticket: "I was charged twice for one order" }, questions: QUESTIONS }, { signal: interrupt.signal });
    checkAnswers(reply.answers, QUESTIONS);
    return { value: null, detail: `${reply.model}: money ${reply.answers.money.noul.toFixed(2)}, topic ${reply.answers.topic.choice}` };
  });
  await step("batch", async () => {
    let last: Batch | undefined;
    const questions = { money: QUESTIONS.money };
    const records = ["refund please", "parcel lost", "app crashes"].map((ticket, i) => ({ custom_id: `smoke-${i + 1}`, body: { state: { ticket }, questions } }));
    const onProgress = (batch: Batch) => {
      const { completed, failed, total } = batch.request_counts;
      if (batch.status !== last?.status || completed + failed !== last.request_counts.completed + last.request_counts.failed) {
        say(`     batch ${batch.status}${total > 0 ? ` ${completed + failed}/${total}` : ""}`);
      }
      last = batch;
    };
    try {
      const { batch, results } = await client.batches.run(records, { pollInterval: 1000, onProgress, signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), interrupt.signal]) });
      if (batch.status !== "completed") throw new StepFailed(`batch ${batch.id} ended ${batch.status}${batch.error ? `: ${batch.error.message}` : ""}`);
      const all = await results.toArray();
      if (all.length !== records.length) throw new StepFailed(`batch ${batch.id} has ${all.length} results, not ${records.length}`);
      for (const record of all) {
        if (!("response" in record)) throw new StepFailed(`record ${record.custom_id}: ${record.error.status} ${record.error.code}: ${record.error.message}`);
        checkAnswers(record.response.answers, questions);
      }
      return { value: null, detail: `${batch.id}: ${all.length} records answered` };
    } catch (err) {
      if (!(err instanceof APIUserAbortError)) throw err;
      // Out of time or interrupted: cancelled, since nobody would watch it run on.
      if (last) await client.batches.cancel(last.id).catch(() => {});
      const why = interrupt.signal.aborted ? "interrupted" : `not finished within ${timeoutMs / 1000} s`;
      throw new StepFailed(`${why}${last ? ` (batch ${last.id} was ${last.status}; cancelled)` : ""}`);
    }
  });
}

async function main(): Promise<number> {
  let options;
  try {
    options = readOptions(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`smoke: ${err.message}\n\n${USAGE.trimEnd()}`);
    return 2;
  }
  if (!options) {
    process.stdout.write(USAGE);
    return 0;
  }
  const failure = await smoke(options);
  if (failure) console.error(scrub(`smoke: ${failure}`));
  return failure ? 1 : 0;
}

process.exit(
  await main().catch((err: unknown) => {
    console.error(scrub(`smoke: unexpected error: ${reason(err)}`));
    return 1;
  }),
);
