/**
 * Reading an uploaded JSONL file line by line, the rules every uploaded file shares (batch inputs,
 * training files): at most `maxBytes` and `maxLines`, UTF-8, one JSON value per line, no U+0000
 * anywhere, raw or escaped, and empty lines only at the end. The first violation is the file's error,
 * naming its line (1-based, as in the file).
 *
 *     const read = readJsonl(bytes, { maxBytes, maxLines, holds: "a batch input", unit: "records" });
 *     if (!read.ok) fail(read.error);                 // {code, message, line}
 *     else for (const { line, value } of read.lines) ...
 */
import { JsonError, parseJson } from "./json.ts";
import { LIMITS } from "./limits.ts";

/** A file-level failure: a stable code, a message naming the line, and the line (null: the whole file). */
export interface FileError {
  code: string;
  message: string;
  line: number | null;
}

export interface JsonlLine {
  line: number;
  /** The line's JSON value, objects as ordered Maps (contract/json.ts). */
  value: unknown;
}

export type JsonlRead = { ok: true; lines: JsonlLine[] } | { ok: false; error: FileError };

export interface JsonlBounds {
  maxBytes: number;
  maxLines: number;
  /** What the file is, for messages: "a batch input". */
  holds: string;
  /** What one line is, for messages: "records". */
  unit: string;
}

export const fileError = (code: string, message: string, line: number | null): { ok: false; error: FileError } => ({ ok: false, error: { code, message, line } });

export function readJsonl(bytes: Uint8Array, bounds: JsonlBounds): JsonlRead {
  if (bytes.byteLength > bounds.maxBytes) {
    return fileError("file_too_large", `the file is ${bytes.byteLength} bytes; ${bounds.holds} holds at most ${bounds.maxBytes}`, null);
  }
  const raw = splitLines(bytes);
  while (raw.length > 0 && isBlank(raw.at(-1)!)) raw.pop();
  if (raw.length === 0) return fileError("empty_file", `the file holds no ${bounds.unit}`, null);
  if (raw.length > bounds.maxLines) {
    return fileError("too_many_records", `the file holds ${raw.length} lines; ${bounds.holds} holds at most ${bounds.maxLines} ${bounds.unit}`, bounds.maxLines + 1);
  }
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  const lines: JsonlLine[] = [];
  for (const [i, bytesOfLine] of raw.entries()) {
    const line = i + 1;
    if (isBlank(bytesOfLine)) return fileError("invalid_jsonl", `line ${line} is empty; only the end of the file may hold empty lines`, line);
    let text: string;
    try {
      text = decoder.decode(bytesOfLine);
    } catch {
      return fileError("invalid_utf8", `line ${line} is not valid UTF-8`, line);
    }
    try {
      lines.push({ line, value: parseJson(text.endsWith("\r") ? text.slice(0, -1) : text, { maxDepth: LIMITS.jsonDepth + 1 }) });
    } catch (err) {
      if (!(err instanceof JsonError)) throw err;
      return fileError(err.reason === "nul" ? "nul_character" : "invalid_jsonl", `line ${line}: ${err.message}`, line);
    }
  }
  return { ok: true, lines };
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
