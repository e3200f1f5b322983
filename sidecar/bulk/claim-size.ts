/**
 * How many records a bulk claim takes: as many as fill about LIMITS.bulkExecutionMs of runtime time,
 * from the time the last executions took per record, at most LIMITS.bulkClaimRecords. A pass of a
 * CPU runtime (about 100 ms) makes that one record per execution; millisecond passes on a GPU make
 * it several, so the runtime does not wait for a lane handover and a commit per record.
 *
 *     const size = new ClaimSize();
 *     size.ran(ms, records);   // after each execution
 *     size.records();          // the next claim's size
 */
import { LIMITS } from "../../contract/limits.ts";

/** What the bulk steps ask of a claim size. */
export type ClaimSizing = Pick<ClaimSize, "ran" | "records">;

/** The size from a moving average of the time per record; one until an execution has been timed. */
export class ClaimSize {
  private msPerRecord: number | null = null;

  /** An execution that took `ms` at the runtime for `records` records. */
  ran(ms: number, records: number): void {
    if (!(records > 0) || !(ms >= 0)) return;
    const sample = ms / records;
    this.msPerRecord = this.msPerRecord === null ? sample : 0.7 * this.msPerRecord + 0.3 * sample;
  }

  records(): number {
    if (this.msPerRecord === null) return 1;
    const fit = Math.floor(LIMITS.bulkExecutionMs / Math.max(this.msPerRecord, 0.1));
    return Math.min(LIMITS.bulkClaimRecords, Math.max(1, fit));
  }
}

/** Every claim of this many records, whatever the executions take (a test's fixed size). */
export function fixedClaimSize(records: number): ClaimSizing {
  return { ran: () => undefined, records: () => records };
}
