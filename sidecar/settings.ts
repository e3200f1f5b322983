/**
 * The sidecar's settings, parsed once at start (environment of `bun sidecar/main.ts`):
 *
 *   SIDECAR_SECRET      shared with the edge; every call must carry it
 *   SIDECAR_URL         the address the edge reaches this sidecar at, exactly as the registry's
 *                       `sidecar_url` names it for the releases this sidecar serves
 *   SIDECAR_PORT        where to listen (0 picks a free port); SIDECAR_HOST defaults to 127.0.0.1
 *   DATABASE_URL        Postgres (Neon in production)
 *   NEON_LOCAL_BRIDGE   `127.0.0.1:<port>` of the local stack's Neon bridge; unset in production
 *
 * Runtime secrets are read from the variables the registry's `token_env` names, when a runtime is called.
 */
import { z } from "zod";
import { integer, optional, required, serviceUrl } from "../server-shared/settings.ts";

export const SidecarSettings = z.object({
  SIDECAR_SECRET: required(),
  SIDECAR_URL: serviceUrl(),
  SIDECAR_PORT: integer(0, 65535),
  SIDECAR_HOST: optional().transform((host) => host ?? "127.0.0.1"),
  DATABASE_URL: required(),
  NEON_LOCAL_BRIDGE: optional(),
});
export type SidecarSettings = z.infer<typeof SidecarSettings>;
