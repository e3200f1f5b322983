/**
 * Reads a JSON request body once, within bounds, and validates it with a schema (edge, sidecar and
 * runtime alike). Every failure is a 422 ServiceError (the size and depth bounds too: the spec keeps
 * 413 for the image flow) whose message names the offending field and echoes no more than a short
 * prefix of any client-supplied name.
 *
 *     const request = await readJson(c, DecisionRequest);
 *     await readJson(c, fields({}), { maxBytes: 1024, emptyIsObject: true });
 *
 * The one place where request bytes become values:
 * - the body is read as a stream and reading stops at `maxBytes`, whatever Content-Length claimed;
 * - the bytes must be UTF-8 (nothing is replaced with U+FFFD);
 * - contract/json.ts parses them keeping every key in order (objects are Maps), and refuses
 *   duplicate keys, U+0000 anywhere, unpaired surrogates and nesting beyond `maxDepth`;
 * - what a handler leaves of a body (all of it when refused early, the rest when refused while
 *   read) is read and dropped by `discardBody`, within `DISCARD_MAX_BYTES`: see there why.
 */
import type { Context } from "hono";
import type { z } from "zod";
import { describeIssues, JsonError, parseJson } from "../contract/json.ts";
import { LIMITS } from "../contract/limits.ts";
import { ServiceError } from "./errors.ts";

export interface ReadJsonOptions {
  /** Largest body accepted, in bytes (default: the decision body limit). */
  maxBytes?: number;
  /** Deepest nesting accepted (default: the spec's JSON depth; internal envelopes add a few levels). */
  maxDepth?: number;
  /** Read an empty body as `{}` (for action routes whose body is `{}`). */
  emptyIsObject?: boolean;
}

export async function readJson<T>(c: Context, schema: z.ZodType<T>, options: ReadJsonOptions = {}): Promise<T> {
  const { maxBytes = LIMITS.decisionBodyBytes, maxDepth = LIMITS.jsonDepth, emptyIsObject = false } = options;
  const text = await readText(c.req.raw, maxBytes);
  // No body at all; whitespace alone is not JSON, and is refused below like any other text that is not.
  if (emptyIsObject && text === "") return validate(schema, new Map());
  let value: unknown;
  try {
    value = parseJson(text, { maxDepth });
  } catch (err) {
    if (!(err instanceof JsonError)) throw err;
    const where = err.path ? ` (at ${err.path})` : "";
    const problem = err.reason === "syntax" ? `is not valid JSON: ${err.message}` : err.reason === "depth" ? `is ${err.message}` : `is refused: ${err.message}`;
    throw new ServiceError("invalid_request", `request body ${problem}${where}`);
  }
  return validate(schema, value);
}

/** The body as UTF-8 text, refused once it passes `maxBytes` (reading stops there) or if it is not UTF-8. */
export async function readText(request: Request, maxBytes: number): Promise<string> {
  const tooLarge = () => new ServiceError("invalid_request", `request body is larger than ${maxBytes} bytes`);
  if (Number(request.headers.get("content-length") ?? 0) > maxBytes) throw tooLarge();
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  const decode = (chunk?: Uint8Array): string => {
    try {
      return chunk ? decoder.decode(chunk, { stream: true }) : decoder.decode();
    } catch {
      throw new ServiceError("invalid_request", "request body is not valid UTF-8");
    }
  };
  let text = "";
  let size = 0;
  if (request.body) {
    const reader = request.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) throw tooLarge();
        text += decode(value);
      }
    } catch (err) {
      // The rest stays readable rather than cancelled, so that the edge can drop it (`discardBody`).
      reader.releaseLock();
      throw err;
    }
  }
  return text + decode();
}

/**
 * The most bytes of a request body that `discardBody` reads and drops: twice the largest body any
 * route takes (a batch input), so that a client that sent a body too large, or one refused before it
 * was read, still gets its answer.
 */
const DISCARD_MAX_BYTES = 2 * LIMITS.bulkFileBytes;

/**
 * Reads and drops what no handler read of a request body, once its response is ready (edge/app.ts):
 * Miniflare's HTTP server ends a keep-alive connection whose request body was left unread (workerd's
 * own does past 64 KiB) without sending `Connection: close`, so a client that reuses the connection
 * gets a reset instead of its next answer. A body held by a reader was its handler's to read; one
 * declared larger than `maxBytes` is left, and its connection ends.
 */
export async function discardBody(request: Request, maxBytes = DISCARD_MAX_BYTES): Promise<void> {
  if (!request.body || request.body.locked) return;
  if (Number(request.headers.get("content-length") ?? 0) > maxBytes) return;
  // A client that asked to hear first (Expect: 100-continue) sends no body once it has an answer.
  if (request.headers.get("expect")?.toLowerCase() === "100-continue") return;
  const reader = request.body.getReader();
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel();
        return;
      }
    }
  } catch {
    // The client stopped sending: there is no connection left to keep.
  }
}

function validate<T>(schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ServiceError("invalid_request", describeIssues(parsed.error));
  return parsed.data;
}
