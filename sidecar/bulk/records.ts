/**
 * Bulk records, from their stored bodies to the results to commit (runs in the sidecar's bulk
 * worker): for each, the same checks as the real-time route (contract schema, images, the request's
 * token bound), the model resolved among the releases frozen at submit, quota admission with the
 * real-time script and the runtime's admission; then the passes of all of them in one execution on
 * the bulk lane. What cannot be answered becomes an error record with the status, code and message
 * the real-time route would have given.
 *
 *     const { outcomes, leftLane } = processRecords(ctx, records, entry, signal);
 *     await leftLane;       // the next execution may enter the bulk lane now
 *     await outcomes;       // each {kind: "result", text, usage} | {kind: "retry", code, reason} (a transient failure) | {kind: "deadline"}
 *
 * Waiting is never failure: a quota refusal (429), a full lane (529) or a lane wait (504) wait for
 * capacity until `deadline`, and the record is then left for the batch's expiry.
 */
import type { SecretReader } from "../../server-shared/secrets.ts";
import type { Redis } from "@upstash/redis";
import { requestTokenBound } from "../../contract/budget.ts";
import { DecisionRequest, type DecisionResponse, type Usage } from "../../contract/decision.ts";
import { ERROR_STATUS, type ErrorCode } from "../../contract/errors.ts";
import { JsonError, parseJson, stringifyJson } from "../../contract/json.ts";
import { LIMITS, SHARED_ALIAS } from "../../contract/limits.ts";
import { describeIssues } from "../../contract/json.ts";
import { decisionViolation } from "../../server-shared/decisions.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { admit } from "../../server-shared/quota.ts";
import type { AccountSettings } from "../../server-shared/accounts.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { FrozenModels, StoredRecord } from "../../server-shared/jobs/batches.ts";
import type { Admission } from "../decide/admission.ts";
import { admitDecision, runDecision } from "../decide/execute.ts";
import { PassGroups, PassSlots, type GroupLimits } from "../decide/passes.ts";
import type { Steps } from "../decide/steps.ts";
import { verifiedRelease, type Release } from "../decide/identity.ts";
import { LaneFullError, LaneWaitTimeoutError, type Lanes } from "../lanes.ts";
import { ownedBy, RuntimeError, runtimeClientFor, type RuntimeClient } from "../runtime/client.ts";

export interface RecordContext {
  lanes: Pick<Lanes, "run" | "realtimeWaiting">;
  /** Null when no Redis is configured: accounts with quotas then wait (as real-time answers 503). */
  redis: Redis | null;
  /** The runtime secrets, by the name a registry entry's `token_env` gives. */
  secrets: SecretReader;
  account: { id: string } & Pick<AccountSettings, "requests_per_second" | "tokens_per_second">;
  models: FrozenModels;
  /** The job deadline (ms since the epoch): waiting for capacity stops there. */
  deadline: number;
  /** The readout's steps (SERVED_STEPS by default). */
  steps?: Steps;
  /** What the worker's consecutive executions share at the runtime (slots of the execution's own when absent). */
  background?: BackgroundSlots;
}

/** A record's result to commit: its JSON text, and its usage when it succeeded. */
export interface ResultOutcome {
  kind: "result";
  text: string;
  usage: { releaseId: string; usage: Usage } | null;
}

/** A failure worth another attempt: its code (what the record's error says if it is the last) and the operator's note. */
export interface RetryOutcome {
  kind: "retry";
  code: ErrorCode;
  reason: string;
}

export type Outcome = ResultOutcome | RetryOutcome | { kind: "deadline" };

/** How long to wait before asking again for a full lane or an unavailable quota service. */
const CAPACITY_POLL_MS = 200;

/** The release a record's model names among those frozen at submit; null when the job did not freeze it. */
export function frozenRelease(models: FrozenModels, name: string): { id: string; fingerprint: string } | null {
  const alias = Object.hasOwn(models.aliases, name);
  if (!alias && models.direct && !models.direct.includes(name)) return null;
  const id = alias ? models.aliases[name]! : name;
  return Object.hasOwn(models.releases, id) ? { id, fingerprint: models.releases[id]! } : null;
}

/** The model a stored body names (the shared alias when it names none), read without validating the rest. */
export function modelOf(body: string): string {
  try {
    const value = parseJson(body);
    const model = value instanceof Map ? value.get("model") : undefined;
    return typeof model === "string" ? model : SHARED_ALIAS;
  } catch {
    return SHARED_ALIAS;
  }
}

/**
 * The background's passes at the runtime (a bulk execution's records, a training example's): at most
 * two group calls at once (the next one read while the runtime evaluates the other), each of at
 * most 16 passes, the two together at most 8,192 tokens by their byte bound (render.ts
 * passTokenBound, never below the real count). The runtime takes a background call a turn at a
 * time (a chunk of `sequences` passes, or one pass where `sequences` is 1) and a real-time call
 * before every turn waiting, so a real-time execution that takes the lane waits behind one turn at
 * most: on a CPU runtime one pass (at most 4,096 tokens), on a GPU one chunk (at most 16 passes and
 * 8,192 tokens, 17 decodes). Before groups it could wait behind three one-pass evaluations: up to
 * 12,288 tokens in 24 decodes (on the H200 cost model, runtime/fixed-pass-engine.ts GPU_COSTS,
 * 309 ms now against 440 at most).
 */
export const BACKGROUND_GROUPS: GroupLimits = { calls: 2, passes: 16, tokens: 2 * LIMITS.tokensPerPass };

/** Records of the background at the runtime at once: enough for the next groups to be waiting while the runtime evaluates. */
export const BACKGROUND_RECORDS = 2 * BACKGROUND_GROUPS.passes;

/**
 * What the sidecar's background work shares at the runtime (sidecar/start.ts makes one for the bulk
 * and the training workers): at most BACKGROUND_RECORDS records started, their passes in the
 * background's groups (BACKGROUND_GROUPS), ranked in the order they started. A bulk execution
 * leaves the lane once its last record has started, so the next one starts its records as this
 * one's end and the runtime never waits for a lane handover between two executions.
 */
export class BackgroundSlots {
  readonly records = new PassSlots(BACKGROUND_RECORDS);
  readonly groups = new PassGroups(BACKGROUND_GROUPS);
  private started = 0;

  /** Where a record starting now sends its passes: after every pass of the records started before it. */
  nextPlace(): { groups: PassGroups; rank: number } {
    return { groups: this.groups, rank: this.started++ };
  }
}

/** A record checked, admitted to its quota and by the runtime, ready for its passes. */
interface Ready {
  kind: "ready";
  release: Release;
  client: RuntimeClient;
  admission: Admission;
}

/** One execution of records (processRecords): its outcomes, and when it has left the bulk lane for good (every record started, or none will). */
export interface RecordsExecution {
  outcomes: Promise<Outcome[]>;
  leftLane: Promise<void>;
}

/**
 * Consecutive records of one batch on one release (`entry`: its registry entry as read with the
 * claim; null when the registry no longer assigns it to this sidecar, or it was retired), each with
 * its outcome, in order. Each is checked and admitted on its own (its quota, then the runtime's
 * admission), concurrently; those admitted then run as one bulk-lane execution, which leaves the lane
 * once its last record has started (BackgroundSlots). `ran` is told the execution's time at the runtime and
 * how many records it ran (steps.ts sizes its claims with it).
 */
export function processRecords(
  ctx: RecordContext,
  records: StoredRecord[],
  entry: RegistryEntry | null,
  signal: AbortSignal,
  ran?: (ms: number, records: number) => void,
): RecordsExecution {
  let left!: () => void;
  const leftLane = new Promise<void>((resolve) => (left = resolve));
  const outcomes = runRecords(ctx, records, entry, signal, left, ran).finally(left);
  return { outcomes, leftLane };
}

async function runRecords(
  ctx: RecordContext,
  records: StoredRecord[],
  entry: RegistryEntry | null,
  signal: AbortSignal,
  leftLane: () => void,
  ran?: (ms: number, records: number) => void,
): Promise<Outcome[]> {
  // One client for the execution's records (one runtime, one account), so that their passes go in the same groups.
  let client: RuntimeClient | undefined;
  const clientOf = (entry: RegistryEntry) => (client ??= ownedBy(runtimeClientFor(entry, ctx.secrets), ctx.account.id));
  const prepared = await Promise.all(records.map((record) => prepareRecord(ctx, record, entry, clientOf, signal)));
  const ready = prepared.flatMap((p, i) => (p.kind === "ready" ? [{ i, record: records[i]!, ...p }] : []));
  const outcomes: Outcome[] = prepared.map((p) => (p.kind === "ready" ? { kind: "deadline" } : p));
  const background = ctx.background ?? new BackgroundSlots();
  const running: { i: number; outcome: Promise<Outcome> }[] = [];
  // Each turn's time at the runtime: from its first record's start to its last record's end.
  const turns: Promise<number>[] = [];
  let pending = ready;
  while (pending.length > 0) {
    // The first record's place at the runtime is taken before the lane: an execution never holds
    // the lane while it waits for the records of the one before to end.
    await background.records.acquire();
    let placeHeld = true;
    try {
      const turn = await ctx.lanes.run(
        "bulk",
        () => {
          placeHeld = false;
          return startInTurn(ctx, background, pending, signal);
        },
        signal,
      );
      for (const [k, outcome] of turn.outcomes.entries()) running.push({ i: pending[k]!.i, outcome });
      turns.push(Promise.allSettled(turn.outcomes).then(() => performance.now() - turn.started));
      // Real time came in: the records not started yet run in the next bulk execution, behind it.
      pending = pending.slice(turn.outcomes.length);
    } catch (err) {
      if (placeHeld) background.records.release();
      // A full lane or a long wait: the GPU is busy (real-time first); wait for capacity.
      if (!(err instanceof LaneFullError || err instanceof LaneWaitTimeoutError)) throw err;
      if (!(await pause(CAPACITY_POLL_MS, ctx.deadline, signal))) break; // the records not run stay "deadline"
    }
  }
  leftLane();
  const results = await Promise.all(running.map((r) => r.outcome));
  for (const [k, result] of results.entries()) outcomes[running[k]!.i] = result;
  if (turns.length > 0) ran?.((await Promise.all(turns)).reduce((sum, ms) => sum + ms, 0), results.length);
  return outcomes;
}

/**
 * One bulk execution's turn on the lane: starts the ready records in record order (the first in the
 * place its caller took), each further one once fewer than BACKGROUND_RECORDS records of the
 * background are started (BackgroundSlots), and starts no further record once a real-time execution waits
 * for the lane (real time then waits for at most one turn of the background's calls at the
 * runtime, BACKGROUND_GROUPS, not for the whole claim) or the execution is abandoned.
 * Returns, leaving the lane, once the records it started are at the runtime: their outcomes, in
 * order, and when the first started.
 */
async function startInTurn(
  ctx: RecordContext,
  background: BackgroundSlots,
  records: (Ready & { record: StoredRecord })[],
  signal: AbortSignal,
): Promise<{ outcomes: Promise<Outcome>[]; started: number }> {
  const outcomes: Promise<Outcome>[] = [];
  const started = performance.now();
  const stop = () => ctx.lanes.realtimeWaiting() || signal.aborted;
  for (const [k, r] of records.entries()) {
    if (k > 0) {
      if (stop()) break;
      await background.records.acquire();
      if (stop()) {
        background.records.release();
        break;
      }
    }
    const outcome = runReady(ctx, r.record, r, signal, background.nextPlace()).finally(() => background.records.release());
    outcome.catch(() => undefined); // awaited by the execution, with the others
    outcomes.push(outcome);
  }
  return { outcomes, started };
}

/** One record's checks, quota admission and runtime admission: ready for its passes, or its outcome already. */
async function prepareRecord(
  ctx: RecordContext,
  record: StoredRecord,
  entry: RegistryEntry | null,
  clientOf: (entry: RegistryEntry) => RuntimeClient,
  signal: AbortSignal,
): Promise<Ready | Outcome> {
  let request: DecisionRequest;
  try {
    const parsed = DecisionRequest.safeParse(parseJson(record.body, { maxDepth: LIMITS.jsonDepth }));
    if (!parsed.success) return errorRecord(record, "invalid_request", describeIssues(parsed.error));
    request = parsed.data;
  } catch (err) {
    if (err instanceof JsonError) return errorRecord(record, "invalid_request", err.message);
    throw err;
  }
  const violation = decisionViolation(request);
  if (violation) return errorRecord(record, violation.code, violation.message);
  const frozen = frozenRelease(ctx.models, request.model);
  if (!frozen || (entry && entry.id !== frozen.id)) return errorRecord(record, "model_not_found", "no model of that name is available to this account");
  // Frozen at submit, but retired since (the claim takes such a record only then).
  if (!entry) return errorRecord(record, "model_not_found", `the model ${JSON.stringify(frozen.id)} was retired after this batch was submitted; no answer was produced`);

  // Quota admission with the real-time script: a refusal waits for the next window, never fails.
  for (;;) {
    signal.throwIfAborted();
    try {
      const admission = ctx.redis
        ? await admit(ctx.redis, ctx.account, requestTokenBound(request))
        : ctx.account.requests_per_second === null && ctx.account.tokens_per_second === null
          ? ({ admitted: true } as const)
          : ({ admitted: false, retryAfterMs: CAPACITY_POLL_MS } as const);
      if (admission.admitted) break;
      if (!(await pause(admission.retryAfterMs, ctx.deadline, signal))) return { kind: "deadline" };
    } catch (err) {
      if (!(err instanceof ServiceError && err.code === "quota_unavailable")) throw err;
      if (!(await pause(CAPACITY_POLL_MS, ctx.deadline, signal))) return { kind: "deadline" };
    }
  }

  try {
    // The release frozen at submit, checked against its registry row as real-time checks the edge's.
    const release = await verifiedRelease(entry, frozen);
    const client = clientOf(entry);
    const admission = await admitDecision(client, release, { state: request.state, questions: request.questions }, signal, ctx.steps);
    return { kind: "ready", release, client, admission };
  } catch (err) {
    return failed(record, err, signal);
  }
}

/** A ready record's passes, on the lane its execution holds: its result, or its failure's outcome. */
async function runReady(ctx: RecordContext, record: StoredRecord, { release, client, admission }: Ready, signal: AbortSignal, place: { groups: PassGroups; rank: number }): Promise<Outcome> {
  try {
    const execution = await runDecision(client, release, admission, signal, ctx.steps, place);
    const response: DecisionResponse = { model: release.id, answers: execution.answers, usage: execution.usage };
    return {
      kind: "result",
      text: `{"custom_id":${JSON.stringify(record.customId)},"response":${stringifyJson(response)}}`,
      usage: { releaseId: release.id, usage: execution.usage },
    };
  } catch (err) {
    return failed(record, err, signal);
  }
}

/** A record's failure: worth another attempt (the runtime failed, or was unavailable), or its error record; an abort is thrown on. */
function failed(record: StoredRecord, err: unknown, signal: AbortSignal): Outcome {
  if (signal.aborted) throw err;
  if (err instanceof RuntimeError || (err instanceof ServiceError && (err.status === 503 || err.status === 504))) {
    return { kind: "retry", code: err.code, reason: err.operatorNote ?? err.message };
  }
  if (err instanceof ServiceError) return errorRecord(record, err.code, err.message);
  throw err;
}

/** The error record of a record that cannot be answered (or no longer retried). */
export function errorRecord(record: StoredRecord, code: ErrorCode, message: string): ResultOutcome {
  const error = { status: ERROR_STATUS[code], code, message };
  return { kind: "result", text: JSON.stringify({ custom_id: record.customId, error }), usage: null };
}

/** Waits `ms` (at most until the deadline); false once the deadline has passed. */
async function pause(ms: number, deadline: number, signal: AbortSignal): Promise<boolean> {
  const wait = Math.min(ms, deadline - Date.now());
  if (wait <= 0) return false;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, wait);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
  return Date.now() < deadline;
}
