/**
 * A claim's outcomes committed: results, usage rows and the batch's counts in one statement fenced by
 * the claim (BatchStore.commit, bulk_commit_records in schema.sql), so a worker whose lease was lost,
 * whose batch was cancelled or whose account was disabled commits nothing, and each line has one
 * result at most. The same round trip releases the batch and makes the worker's next claim.
 *
 * A record whose execution failed transiently is counted and tried again after a wait
 * (TRANSIENT_BACKOFF_MS, doubled per attempt); after LIMITS.bulkTransientAttempts it is answered with
 * an error record. A record past the batch's deadline is left unfinished: the batch expires.
 */
import { LIMITS } from "../../contract/limits.ts";
import type { BatchClaim, BatchStore, ClaimRequest, RecordCommit } from "../../server-shared/jobs/batches.ts";
import { errorRecord, type Outcome } from "./records.ts";

/** The wait after a record's first transient failure; it doubles after the second. */
const TRANSIENT_BACKOFF_MS = 2000;

export interface CommitDeps {
  store: BatchStore;
  log: (line: string) => void;
  /** Told of each record committed (the sidecar's svc_bulk_records_total). */
  committed?: (outcome: "answered" | "error") => void;
}

/**
 * Commits the outcomes of the claim's records (in the order of `claim.next.records`) and, with the
 * request `nextClaim` gives (none once the worker is stopping), makes the next claim. Null when
 * nothing was committed.
 */
export async function commitOutcomes(
  deps: CommitDeps,
  claim: BatchClaim,
  outcomes: Outcome[],
  nextClaim: () => Promise<ClaimRequest | undefined>,
  signal: AbortSignal,
): Promise<{ released: BatchClaim | null } | null> {
  const commits: RecordCommit[] = [];
  for (const [i, outcome] of outcomes.entries()) {
    const { record, attempts: before } = claim.next!.records[i]!;
    if (outcome.kind === "deadline") continue; // the batch expires; this record stays unfinished
    if (outcome.kind === "result") {
      commits.push({ record, text: outcome.text, usage: outcome.usage });
      continue;
    }
    const attempts = before + 1;
    if (attempts < LIMITS.bulkTransientAttempts) {
      signal.throwIfAborted();
      await deps.store.retryLater(claim, record.line, attempts, TRANSIENT_BACKOFF_MS);
      deps.log(`sidecar: bulk batch ${claim.id} line ${record.line}: attempt ${attempts} failed (${outcome.reason}); it will be tried again`);
      continue;
    }
    const result = errorRecord(record, outcome.code, `the model runtime failed ${attempts} times on this record; retry it in a new batch`);
    commits.push({ record, text: result.text, usage: null });
  }
  if (commits.length === 0) return null;
  signal.throwIfAborted();
  const released = await deps.store.commit(claim, commits, await nextClaim());
  for (const commit of commits) deps.committed?.(commit.usage ? "answered" : "error");
  return { released };
}
