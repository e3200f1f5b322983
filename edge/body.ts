/**
 * Reads a JSON request body once, within the spec's bounds, and validates it with a contract schema.
 * Every failure is a 422 ServiceError (the size and depth bounds too: the spec keeps 413 for the
 * image flow) whose message names the offending field.
 */
import type { Context } from "hono";
import type { z } from "zod";
import { ServiceError } from "../contract/errors.ts";
import { LIMITS } from "../contract/limits.ts";

export async function readJson<T>(
  c: Context,
  schema: z.ZodType<T>,
  maxBytes: number = LIMITS.decisionBodyBytes,
  /** Read an empty body as `{}` (for action routes whose body is `{}`). */
  emptyIsObject = false,
): Promise<T> {
  const declared = Number(c.req.header("content-length") ?? 0);
  if (declared > maxBytes) throw new ServiceError("invalid_request", `request body is larger than ${maxBytes} bytes`);
  const text = await c.req.text();
  if (new TextEncoder().encode(text).length > maxBytes) {
    throw new ServiceError("invalid_request", `request body is larger than ${maxBytes} bytes`);
  }
  let value: unknown;
  if (emptyIsObject && text.trim() === "") return schema.parse({});
  try {
    value = JSON.parse(text);
  } catch {
    throw new ServiceError("invalid_request", "request body is not valid JSON");
  }
  if (jsonDepth(value) > LIMITS.jsonDepth) {
    throw new ServiceError("invalid_request", `request body is nested deeper than ${LIMITS.jsonDepth} levels`);
  }
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
