/**
 * The values of `svc decide`'s input options (runs in a user's terminal): the text itself, `@path`
 * for a UTF-8 file, or `-` for standard input (one option at most may read it). Each input is at
 * most the decision body limit (1 MiB); JSON is read with the contract's parser, which keeps key
 * order (the order of questions and of options is meaning) and refuses duplicate keys.
 *
 *     const text = await readInput("--state", "@ticket.json", { stdin });
 *     const state = stateOf("--state", text);      // a JSON object or array, else the text itself
 */
import { open } from "node:fs/promises";
import { JsonError, parseJson, type Json } from "../../../contract/json.ts";
import { LIMITS } from "../../../contract/limits.ts";
import { UsageError } from "./errors.ts";

/** At most this many bytes are read from any one input. */
export const INPUT_MAX_BYTES = LIMITS.decisionBodyBytes;
const MIB = (INPUT_MAX_BYTES / (1024 * 1024)).toString();

/** Checks that at most one of the options reads standard input. */
export function checkOneStdin(values: Record<string, string | undefined>): void {
  const readers = Object.entries(values).filter(([, value]) => value === "-").map(([name]) => name);
  if (readers.length > 1) throw new UsageError(`only one option may read standard input (-), but ${readers.join(" and ")} both do`);
}

/** The text an option names: itself, a file's content (`@path`), or standard input (`-`). */
export async function readInput(option: string, value: string, io: { stdin: NodeJS.ReadableStream }): Promise<string> {
  if (value === "-") return decode(option, "standard input", await readStream(option, io.stdin));
  if (value.startsWith("@")) {
    const path = value.slice(1);
    if (path === "") throw new UsageError(`${option} @ needs a file name after the @`);
    return decode(option, path, await readFile(option, path));
  }
  if (Buffer.byteLength(value) > INPUT_MAX_BYTES) throw new UsageError(`${option} is larger than ${MIB} MiB`);
  return value;
}

async function readFile(option: string, path: string): Promise<Buffer> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (err) {
    throw new UsageError(`${option}: cannot read ${path}: ${reason(err)}`);
  }
  try {
    if (!(await handle.stat()).isFile()) throw new UsageError(`${option}: ${path} is not a file`);
    return await readStream(option, handle.createReadStream({ autoClose: false }), path);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${option}: cannot read ${path}: ${reason(err)}`);
  } finally {
    await handle.close();
  }
}

/** Reads to the end, but never more than the limit (plus the one byte that shows it was passed). */
async function readStream(option: string, stream: NodeJS.ReadableStream, name = "standard input"): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
    size += bytes.length;
    if (size > INPUT_MAX_BYTES) {
      if ("destroy" in stream && typeof stream.destroy === "function") stream.destroy();
      throw new UsageError(`${option}: ${name} is larger than ${MIB} MiB`);
    }
    chunks.push(bytes);
  }
  return Buffer.concat(chunks);
}

function decode(option: string, name: string, bytes: Buffer): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new UsageError(`${option}: ${name} is not UTF-8 text`);
  }
}

function reason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  if (code === "EISDIR") return "it is a folder";
  return code ?? (err as Error).message;
}

/** JSON text as the contract reads it; a UsageError names the option and where the text is wrong. */
export function jsonOf(option: string, text: string): Json {
  try {
    return parseJson(text, { maxDepth: LIMITS.jsonDepth });
  } catch (err) {
    if (err instanceof JsonError) throw new UsageError(`${option} is not valid JSON: ${err.message}${err.path ? ` (at ${err.path})` : ""}`);
    throw err;
  }
}

/**
 * The state: JSON when the text is a JSON object, array or string; otherwise the text itself (so
 * `--state 'charged twice'` is text). Text that starts like an object or array must parse.
 */
export function stateOf(option: string, text: string): Json {
  const trimmed = text.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) return jsonOf(option, text);
  if (trimmed.startsWith('"')) {
    try {
      return parseJson(text);
    } catch {
      return text;
    }
  }
  return text;
}
