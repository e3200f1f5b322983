/**
 * Reading ahead: while a claim's records run, the records the next claim will most likely give (the
 * same batch's next ones, when no other batch waits for a turn: BatchStore.peekNext) are read and
 * prepared (their checks, quota admissions and runtime admissions), queued to enter the bulk lane the
 * moment the running execution has started its last record (records.ts BackgroundSlots), so that
 * their passes follow its last ones at the runtime: the runtime then waits neither for a database
 * round trip nor for a lane handover between executions.
 *
 * Prepared records are committed only under the claim that gives them, as any record is; when that
 * claim names other records (another batch took its turn, the lease was lost), the prepared ones
 * are dropped and run again when their turn comes (their quota admissions then count twice:
 * reservations, unused ones are not refunded).
 *
 *     readAhead.prepareAfter(claim, ctx, entry, lastLine, running.leftLane);
 *     const prepared = await readAhead.take(nextClaim.id, nextRecords);   // its execution, or null
 */
import type { BatchClaim, BatchStore, StoredRecord } from "../../server-shared/jobs/batches.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { ClaimSizing } from "./claim-size.ts";
import { processRecords, type RecordContext, type RecordsExecution } from "./records.ts";

/** Records prepared ahead: the batch they belong to, and their lines and execution once the peek has read them (null: nothing to prepare). */
interface Prepared {
  batchId: string;
  abort: AbortController;
  ready: Promise<{ lines: number[]; execution: RecordsExecution } | null>;
}

export class ReadAhead {
  private prepared: Prepared | null = null;
  private stopped = false;
  /** The size of the claim the next commit makes: the one the records prepared ahead were read for (null: none prepared). */
  private claimRecords: number | null = null;

  constructor(
    private readonly deps: {
      store: BatchStore;
      /** The releases served here. */
      served: () => Promise<string[]>;
      size: ClaimSizing;
    },
  ) {}

  /** The next claim's size: the one the records prepared ahead were read for, else the one the executions' times give now. */
  nextClaimRecords(): number {
    return this.claimRecords ?? this.deps.size.records();
  }

  /**
   * Reads the records after `line` that the next claim will most likely give and prepares them while
   * the running execution runs: their admissions now, their execution queued for the bulk lane once
   * the running one has left it for good (`runningLeft`: all its records started, so this one never
   * overtakes it). Anything prepared before is dropped.
   */
  prepareAfter(claim: BatchClaim, ctx: RecordContext, entry: RegistryEntry | null, line: number, runningLeft: Promise<void>): void {
    this.drop();
    if (!entry || this.stopped) return;
    const abort = new AbortController();
    const lanes: RecordContext["lanes"] = {
      run: async (lane, work, signal) => {
        await runningLeft;
        return ctx.lanes.run(lane, work, signal);
      },
      realtimeWaiting: () => ctx.lanes.realtimeWaiting(),
    };
    const size = this.deps.size.records();
    this.claimRecords = size;
    const ready = (async () => {
      const after = await this.deps.store.peekNext(claim.id, line, await this.deps.served(), size);
      // Records on another release (or on none) are left to their own turn.
      if (!after || after.releaseId !== entry.id || abort.signal.aborted) return null;
      const execution = processRecords({ ...ctx, lanes }, after.records, entry, abort.signal, (ms, n) => this.deps.size.ran(ms, n));
      execution.outcomes.catch(() => undefined); // awaited by the step that takes them, or dropped
      return { lines: after.records.map((r) => r.line), execution };
    })().catch(() => null);
    this.prepared = { batchId: claim.id, abort, ready };
  }

  /** The execution prepared for exactly `records` of `batchId`, when that is what was prepared; anything else prepared is dropped. */
  async take(batchId: string, records: StoredRecord[]): Promise<{ execution: RecordsExecution } | null> {
    const prepared = this.prepared;
    this.prepared = null;
    this.claimRecords = null;
    if (!prepared) return null;
    const ready = prepared.batchId === batchId ? await prepared.ready : null;
    if (ready && ready.lines.length === records.length && ready.lines.every((line, i) => line === records[i]!.line)) return ready;
    abandon(prepared);
    return null;
  }

  /** Drops what was prepared (a waiting lane entry leaves at once; passes already sent finish unused). */
  drop(): void {
    if (this.prepared) abandon(this.prepared);
    this.prepared = null;
    this.claimRecords = null;
  }

  /** Drops what was prepared and prepares nothing more: the worker stops. */
  stop(): void {
    this.stopped = true;
    this.drop();
  }
}

function abandon(prepared: Prepared): void {
  prepared.abort.abort(new Error("the prepared record was not the next claim's"));
}
