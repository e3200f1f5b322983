/**
 * Reads a JSON request body once, within bounds, and validates it with a schema (edge, sidecar and
 * runtime alike). Every failure is a 422 ServiceError (the size and depth bounds too: the spec keeps
 * 413 for the image flow) whose message names the offending field.
 *
 *     const request = await readJson(c, DecisionRequest);
 *     await readJson(c, z.object({}), { maxBytes: 1024, emptyIsObject: true });
 */
import type { Context } from "hono";
import type { z } from "zod";
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
  const declared = Number(c.req.header("content-length") ?? 0);
  if (declared > maxBytes) throw new ServiceError("invalid_request", `request body is larger than ${maxBytes} bytes`);
  const text = await c.req.text();
  if (new TextEncoder().encode(text).length > maxBytes) {
    throw new ServiceError("invalid_request", `request body is larger than ${maxBytes} bytes`);
  }
  let value: unknown;
  if (emptyIsObject && text.trim() === "") return parseWith(schema, {});
  try {
    value = JSON.parse(text);
  } catch {
    throw new ServiceError("invalid_request", "request body is not valid JSON");
  }
  if (jsonDepth(value) > maxDepth) {
    throw new ServiceError("invalid_request", `request body is nested deeper than ${maxDepth} levels`);
  }
  return parseWith(schema, value);
}

function parseWith<T>(schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ServiceError("invalid_request", describeIssues(parsed.error));
  return parsed.data;
}

/** Depth of a parsed JSON value: a scalar is 0, `{}` and `[]` are 1. Iterative, so deep input cannot overflow the stack. */
export function jsonDepth(value: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== "object") continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** "questions.q1.criteria: too few options; name: name is required" */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => (issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message))
    .join("; ");
}
