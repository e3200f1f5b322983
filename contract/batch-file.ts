/**
 * File-level validation of a batch's input: the sidecar's bulk worker applies it before any
 * inference, and the command-line tool before it uploads a file, so both refuse the same files: the file must be non-empty, at most LIMITS.bulkFileBytes and LIMITS.bulkFileRecords,
 * UTF-8, one `{custom_id, body}` object per line with unique non-empty string ids, and hold no U+0000
 * anywhere, raw or escaped. The first violation fails the whole batch with an error naming its line.
 * A record whose `body` is not a valid decision request is not a file error: its result is a 422
 * error record when it is processed (sidecar/bulk/records.ts). The line-level rules are jsonl.ts's.
 *
 *     const checked = validateInput(bytes);
 *     if (!checked.ok) fail(checked.error);            // {code, message, line}
 *     else store(checked.records);                     // [{line, customId, body}] in file order
 *
 * Lines are numbered from 1 as in the file. Empty lines are allowed only at the end of the file.
 */
import { InputLine } from "./batches.ts";
import type { JobError } from "./jobs.ts";
import { describeIssues, stringifyJson } from "./json.ts";
import { fileError, readJsonl } from "./jsonl.ts";
import { LIMITS } from "./limits.ts";

export interface InputRecord {
  /** 1-based line number in the file. */
  line: number;
  customId: string;
  /** The record's `body` as JSON text, key order kept. */
  body: string;
}

export type Validation = { ok: true; records: InputRecord[] } | { ok: false; error: JobError };

export function validateInput(bytes: Uint8Array): Validation {
  const read = readJsonl(bytes, { maxBytes: LIMITS.bulkFileBytes, maxLines: LIMITS.bulkFileRecords, holds: "a batch", unit: "records" });
  if (!read.ok) return read;
  const records: InputRecord[] = [];
  const seen = new Map<string, number>();
  for (const { line, value } of read.lines) {
    const envelope = InputLine.safeParse(value);
    if (!envelope.success) return fileError("invalid_record", `line ${line}: ${describeIssues(envelope.error)}`, line);
    const { custom_id: customId, body } = envelope.data;
    const first = seen.get(customId);
    if (first !== undefined) return fileError("duplicate_custom_id", `line ${line}: custom_id ${JSON.stringify(customId.slice(0, 40))} is also on line ${first}`, line);
    seen.set(customId, line);
    records.push({ line, customId, body: stringifyJson(body) });
  }
  return { ok: true, records };
}
