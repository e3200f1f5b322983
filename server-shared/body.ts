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
 *   duplicate keys, U+0000 anywhere, unpaired surrogates and nesting beyond `maxDepth`.
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
  if (emptyIsObject && text.trim() === "") return validate(schema, new Map());
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
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge();
      }
      text += decode(value);
    }
  }
  return text + decode();
}

function validate<T>(schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ServiceError("invalid_request", describeIssues(parsed.error));
  return parsed.data;
}
