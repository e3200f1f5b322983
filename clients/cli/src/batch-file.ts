/**
 * A batch's input file checked before anything is created or uploaded (runs in a user's terminal),
 * with the file-level rules the service's worker applies at validation (contract/batch-file.ts): at
 * most 25 MiB and 10,000 records, UTF-8, one `{custom_id, body}` object per line, unique non-empty
 * ids, no U+0000, empty lines only at the end. A file that would fail the whole batch is refused
 * here with exit 2 and the line it fails at; a record body the service refuses is that record's
 * error in the results.
 *
 *     const { bytes, records } = await readBatchFile("tickets.jsonl");
 */
import { validateInput } from "../../../contract/batch-file.ts";
import { LIMITS } from "../../../contract/limits.ts";
import { UsageError } from "./errors.ts";
import { readJobFile } from "./jobs.ts";

export async function readBatchFile(path: string): Promise<{ bytes: Uint8Array; records: number }> {
  const bytes = await readJobFile(path, "batch", LIMITS.bulkFileBytes);
  return { bytes, records: checkBatchFile(path, bytes) };
}

/** Returns the number of records, or throws a UsageError naming the first line that is wrong. */
export function checkBatchFile(path: string, bytes: Uint8Array): number {
  const checked = validateInput(bytes);
  if (!checked.ok) throw new UsageError(`${path}: ${checked.error.message}`);
  return checked.records.length;
}
