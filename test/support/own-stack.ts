/**
 * Helpers for test files that run a stack of their own (test/images.test.ts,
 * test/image-models.test.ts): an owner signed in with a first key, and a JSON call that returns the
 * status, the parsed body and the headers.
 *
 *     const alice = await owner(stack, "alice-images");     // { userToken, key }
 *     const reply = await callJson(stack.baseUrl, "/v1/image-assets", alice.key, body);
 */
import { CreatedKey } from "../../contract/keys.ts";
import { ErrorEnvelope } from "../../contract/errors.ts";
import type { Stack } from "../../local/stack.ts";
import { getUserAccessToken } from "../../local/user-token.ts";

export interface Owner {
  userToken: string;
  key: string;
}

/** A signed-in user of the stack's identity provider with a first API key. */
export async function owner(stack: Stack, login: string): Promise<Owner> {
  const userToken = await getUserAccessToken({ issuer: stack.idp.issuer, login });
  const res = await fetch(`${stack.baseUrl}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${userToken}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "images" }),
  });
  return { userToken, key: CreatedKey.parse(await res.json()).secret };
}

export interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

/** GET `path` (no body) or POST it with the body as JSON, with `token`. */
export async function callJson(base: string, path: string, token: string, body?: unknown): Promise<Reply> {
  const res = await fetch(`${base}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

export const errorOf = (reply: Reply) => ErrorEnvelope.parse(reply.body).error;
