/**
 * File-level validation of a batch's input: the sidecar's bulk worker applies it before any
 * inference, and the command-line tool before it uploads a file, so both refuse the same files: the file must be non-empty, at most LIMITS.bulkFileBytes and LIMITS.bulkFileRecords,
 * UTF-8, one `{custom_id, body}` object per line with unique non-empty string ids, and hold no U+0000
 * anywhere, raw or escaped. The first violation fails the whole batch with an error naming its line.
 * A record whose `body` is not a valid decision request is not a file error: its result is a 422
 * error record when it is processed (records.ts).
 *
 *     const checked = validateInput(bytes);
 *     if (!checked.ok) fail(checked.error);            // {code, message, line}
 *     else store(checked.records);                     // [{line, customId, body}] in file order
 *
 * Lines are numbered from 1 as in the file. Empty lines are allowed only at the end of the file.
 */
import { InputLine, type BatchError } from "./batches.ts";
import { describeIssues, JsonError, parseJson, stringifyJson } from "./json.ts";
import { LIMITS } from "./limits.ts";

export interface InputRecord {
  /** 1-based line number in the file. */
  line: number;
  customId: string;
  /** The record's `body` as JSON text, key order kept. */
  body: string;
}

export type Validation = { ok: true; records: InputRecord[] } | { ok: false; error: BatchError };

const fail = (code: string, message: string, line: number | null): Validation => ({ ok: false, error: { code, message, line } });

export function validateInput(bytes: Uint8Array): Validation {
  if (bytes.byteLength > LIMITS.bulkFileBytes) {
    return fail("file_too_large", `the file is ${bytes.byteLength} bytes; a batch input holds at most ${LIMITS.bulkFileBytes}`, null);
  }
  const lines = splitLines(bytes);
  while (lines.length > 0 && isBlank(lines.at(-1)!)) lines.pop();
  if (lines.length === 0) return fail("empty_file", "the file holds no records", null);
  if (lines.length > LIMITS.bulkFileRecords) {
    return fail("too_many_records", `the file holds ${lines.length} lines; a batch holds at most ${LIMITS.bulkFileRecords} records`, LIMITS.bulkFileRecords + 1);
  }
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  const records: InputRecord[] = [];
  const seen = new Map<string, number>();
  for (const [i, raw] of lines.entries()) {
    const line = i + 1;
    if (isBlank(raw)) return fail("invalid_jsonl", `line ${line} is empty; only the end of the file may hold empty lines`, line);
    let text: string;
    try {
      text = decoder.decode(raw);
    } catch {
      return fail("invalid_utf8", `line ${line} is not valid UTF-8`, line);
    }
    let value: unknown;
    try {
      value = parseJson(text.endsWith("\r") ? text.slice(0, -1) : text, { maxDepth: LIMITS.jsonDepth + 1 });
    } catch (err) {
      if (!(err instanceof JsonError)) throw err;
      return fail(err.reason === "nul" ? "nul_character" : "invalid_jsonl", `line ${line}: ${err.message}`, line);
    }
    const envelope = InputLine.safeParse(value);
    if (!envelope.success) return fail("invalid_record", `line ${line}: ${describeIssues(envelope.error)}`, line);
    const { custom_id: customId, body } = envelope.data;
    const first = seen.get(customId);
    if (first !== undefined) return fail("duplicate_custom_id", `line ${line}: custom_id ${JSON.stringify(customId.slice(0, 40))} is also on line ${first}`, line);
    seen.set(customId, line);
    records.push({ line, customId, body: stringifyJson(body) });
  }
  return { ok: true, records };
}

/** The file's lines as bytes, split at "\n" (a final newline ends the last line, it opens no new one). */
function splitLines(bytes: Uint8Array): Uint8Array[] {
  const lines: Uint8Array[] = [];
  let start = 0;
  for (let i = 0; i < bytes.byteLength; i++) {
    if (bytes[i] === 0x0a) {
      lines.push(bytes.subarray(start, i));
      start = i + 1;
    }
  }
  if (start < bytes.byteLength) lines.push(bytes.subarray(start));
  return lines;
}

/** Empty, or only spaces, tabs and a carriage return. */
function isBlank(line: Uint8Array): boolean {
  return line.every((byte) => byte === 0x20 || byte === 0x09 || byte === 0x0d);
}
