/**
 * Calls from the console to this origin's API (runs in the browser). A failed call throws an
 * ApiError carrying the service's error envelope (code, message, status), which pages show as is.
 */
import { ErrorEnvelope } from "../../contract/errors.ts";
import { parseJson, type Json } from "../../contract/json.ts";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface Reply {
  status: number;
  /** The body as parsed by the contract's parser: objects are ordered Maps (for the ordered shapes: answers). */
  body: Json;
  /** The same body as plain objects (for fixed shapes: keys, models). */
  plain: unknown;
  headers: Headers;
}

/** One call with a credential (the session's access token, or an API key) as its bearer. */
export async function call(path: string, credential: string, init: { method?: string; body?: string } = {}): Promise<Reply> {
  let res: Response;
  try {
    res = await fetch(path, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${credential}`, ...(init.body === undefined ? {} : { "content-type": "application/json" }) },
      body: init.body,
    });
  } catch {
    throw new ApiError(0, "network_error", "the service could not be reached");
  }
  const text = await res.text();
  let body: Json = null;
  try {
    body = text ? parseJson(text) : null;
  } catch {
    throw new ApiError(res.status, "bad_response", `the service answered ${res.status} with a body that is not JSON`);
  }
  if (!res.ok) {
    const envelope = ErrorEnvelope.safeParse(body);
    if (envelope.success) throw new ApiError(envelope.data.error.status, envelope.data.error.code, envelope.data.error.message);
    throw new ApiError(res.status, "http_error", `the service answered ${res.status}`);
  }
  return { status: res.status, body, plain: text ? JSON.parse(text) : null, headers: res.headers };
}

/** An error as a page shows it: the service's message with its code and status. */
export function describe(err: unknown): string {
  if (err instanceof ApiError) return `${err.message} (${err.code}, ${err.status})`;
  return err instanceof Error ? err.message : String(err);
}

/**
 * A signed PUT of a file, with exactly the headers its grant names (no credential: the address is
 * the grant); XMLHttpRequest, because fetch reports no upload progress.
 */
export function upload(url: string, headers: Record<string, string>, file: Blob, progress: (bytes: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("PUT", url);
    // The browser sends the body's length itself (and refuses to be told it); the grant signs that very length.
    for (const [name, value] of Object.entries(headers)) if (name.toLowerCase() !== "content-length") request.setRequestHeader(name, value);
    request.upload.onprogress = (event) => progress(event.loaded);
    request.onload = () => (request.status >= 200 && request.status < 300 ? resolve() : reject(new Error(`the upload was refused (${request.status})`)));
    request.onerror = () => reject(new Error("the upload could not reach the storage"));
    request.send(file);
  });
}
