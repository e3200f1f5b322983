/**
 * The edge's internal routes (runs in workerd), for sidecars only: the shared sidecar secret, never a
 * customer credential (server-shared/sidecar-protocol.ts).
 *
 *   POST /internal/grants {object, method: "GET" | "DELETE"} -> Grant
 *        A signed URL, valid LIMITS.workerGrantMs, for one batch input, training file or image object.
 */
import { Hono } from "hono";
import { LIMITS } from "../../contract/limits.ts";
import { readJson } from "../../server-shared/body.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { signGrant } from "../../server-shared/grants.ts";
import { sharedSecret } from "../../server-shared/http.ts";
import { EDGE_INTERNAL_PATHS, GrantRequest, type Grant } from "../../server-shared/sidecar-protocol.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";
import { UPLOAD_OBJECT, storageGrants } from "../storage.ts";

export const internal = new Hono<AppEnv>();

internal.use("/internal/*", async (c, next) => sharedSecret(() => services(c.env).settings.SIDECAR_SECRET.accepted, "sidecar")(c, next));

internal.post(EDGE_INTERNAL_PATHS.grants, async (c) => {
  const { object, method } = await readJson(c, GrantRequest, { maxBytes: 4096 });
  if (!UPLOAD_OBJECT.test(object)) throw new ServiceError("invalid_request", "object: grants are given for batch inputs, training files and image assets only");
  const now = Date.now();
  const grant: Grant = {
    url: await signGrant(storageGrants(c, "hosts"), object, method, LIMITS.workerGrantMs, {}, now),
    method,
    headers: {},
    expires_at: new Date(now + LIMITS.workerGrantMs).toISOString(),
  };
  return c.json(grant);
});
