/**
 * A queued batch's first step: its file (contract/batch-file.ts), read through a short grant the edge
 * signs, is checked. A bad file fails the batch; a good one becomes its records, each with the
 * release its model resolves to among those frozen at submit, and the batch runs, released at once.
 * The other sidecars that serve its records are woken (an idle worker would find them only at its
 * next poll, sidecar/jobs/worker.ts).
 */
import type { Pool } from "@neondatabase/serverless";
import { validateInput } from "../../contract/batch-file.ts";
import { poolDb } from "../../server-shared/db.ts";
import { loggable } from "../../server-shared/errors.ts";
import type { BatchClaim, BatchStore } from "../../server-shared/jobs/batches.ts";
import { sidecarsToWake, wakeSidecars } from "../../server-shared/wake.ts";
import { readInput, type EdgeLink } from "./grants.ts";
import { frozenRelease, modelOf } from "./records.ts";

export interface ValidateDeps {
  pool: Pool;
  store: BatchStore;
  edge: EdgeLink;
  /** This sidecar's SIDECAR_URL: it needs no wake. */
  selfUrl: string;
  log: (line: string) => void;
}

/** Checks the claimed batch's file; stores its records and starts the batch (`{released: null}`: the start released it), or fails it. */
export async function validateBatch(deps: ValidateDeps, claim: BatchClaim, signal: AbortSignal): Promise<{ released: null } | void> {
  const bytes = await readInput(deps.edge, claim.objectKey, signal);
  const checked = bytes === null ? ({ ok: false, error: { code: "input_missing", message: "the input file is gone", line: null } } as const) : validateInput(bytes);
  signal.throwIfAborted();
  if (!checked.ok) {
    await deps.store.fail(claim, checked.error);
    return;
  }
  const releases = checked.records.map((r) => frozenRelease(claim.models, modelOf(r.body))?.id ?? null);
  if (!(await deps.store.start(claim, checked.records, releases))) return;
  // This worker claims again at once; another sidecar's idle worker would wait for its next poll.
  const ids = [...new Set(releases.filter((id) => id !== null))];
  void sidecarsToWake(poolDb(deps.pool), { releases: ids, except: deps.selfUrl })
    // The secret this sidecar sends is the one every sidecar accepts (the edge's).
    .then((others) => wakeSidecars(others, deps.edge.secret(), (line) => deps.log(`sidecar: ${line}`)))
    .catch((err) => deps.log(`sidecar: waking the sidecars of batch ${claim.id}: ${loggable(err)}`));
  return { released: null };
}
