/**
 * One decision forwarded to the sidecar that serves its release (runs in workerd), for the text and
 * the image decision routes: the sidecar's time and its own hops go into Server-Timing, and what it
 * answers is either the decision or the response the client gets instead.
 *
 *     const answered = await decideOnSidecar(c, sidecarUrl, SIDECAR_PATHS.decide, stringifyJson(call), release.id);
 *     if (!answered.ok) return answered.response;   // the sidecar's own 422, 503, 504, 529 (or ours)
 */
import type { Context } from "hono";
import { ErrorEnvelope } from "../contract/errors.ts";
import { parseJson, type Json } from "../contract/json.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { SIDECAR_STALE_STATUS, SidecarDecideResponse, SidecarStale } from "../server-shared/sidecar-protocol.ts";
import { SERVER_TIMING_HEADER, Timings } from "../server-shared/timing.ts";
import type { AppEnv } from "./env.ts";
import { services, sidecarFetch } from "./services.ts";

function parseOrUndefined(text: string): Json | undefined {
  try {
    return parseJson(text);
  } catch {
    return undefined;
  }
}

/**
 * Throws ServiceError for what the edge answers itself (an unreachable sidecar, a proxy's bare 5xx,
 * malformed output); returns the sidecar's error envelope with its status as the client's response.
 */
export async function decideOnSidecar(
  c: Context<AppEnv>,
  sidecarUrl: string,
  path: string,
  body: string,
  releaseId: string,
): Promise<{ ok: true; stale?: never; data: SidecarDecideResponse } | { ok: false; stale?: never; response: Response } | { ok: false; stale: true }> {
  const timings = c.var.timings;
  const started = performance.now();
  let res: Response;
  try {
    res = await sidecarFetch(services(c.env).settings, sidecarUrl, path, { method: "POST", headers: { "content-type": "application/json" }, body });
  } catch {
    throw new ServiceError("unavailable", "the model service is unreachable; retry shortly", `sidecar of release ${releaseId} unreachable`);
  }
  const text = await res.text().catch(() => "");
  // The whole sidecar call as the edge saw it, then the sidecar's own hops inside it.
  timings.add("sidecar", performance.now() - started);
  timings.merge(Timings.parse(res.headers.get(SERVER_TIMING_HEADER)));
  // A kept key or model the sidecar found no longer standing (auth/key-cache.ts): the caller reads them again.
  if (res.status === SIDECAR_STALE_STATUS && SidecarStale.safeParse(parseOrUndefined(text)).success) return { ok: false, stale: true };
  if (!res.ok) {
    // The sidecar speaks the same envelope; its status (413, 422, 503, 504, 529) is the client's answer.
    const envelope = ErrorEnvelope.safeParse(parseOrUndefined(text));
    if (envelope.success) {
      if (res.status === 503 || res.status === 529) c.header("retry-after", "1");
      return { ok: false, response: c.json(envelope.data, res.status as 503) };
    }
    // A proxy in front of a sidecar that is restarting or down answers these itself: retry shortly.
    if (res.status === 502 || res.status === 503 || res.status === 504) {
      throw new ServiceError("unavailable", "the model service is unreachable; retry shortly", `sidecar of release ${releaseId} answered HTTP ${res.status} without the envelope (a proxy in front of it?)`);
    }
    throw new ServiceError("bad_gateway", "the model service answered malformed output");
  }
  const result = SidecarDecideResponse.safeParse(parseOrUndefined(text));
  if (!result.success) throw new ServiceError("bad_gateway", "the model service answered malformed output");
  return { ok: true, data: result.data };
}
