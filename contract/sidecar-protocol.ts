/**
 * The edge -> sidecar call for one real-time decision (`POST /internal/decide`, sidecar secret).
 * The edge has already authenticated, validated, budgeted, admitted and resolved the model; the
 * sidecar re-checks only what it alone can know (exact token counts, the runtime's identity).
 */
import { z } from "zod";
import { DecisionRequest, Usage, Answer } from "./decision.ts";

export const ResolvedRelease = z.object({
  id: z.string(),
  fingerprint: z.string(),
  url: z.string(),
  token_env: z.string(),
});
export type ResolvedRelease = z.infer<typeof ResolvedRelease>;

export const SidecarDecideRequest = z.object({
  release: ResolvedRelease,
  request: DecisionRequest.pick({ state: true, questions: true }),
  account_id: z.string().uuid(),
  key_id: z.string(),
  request_id: z.string(),
});
export type SidecarDecideRequest = z.infer<typeof SidecarDecideRequest>;

export const SidecarDecideResponse = z.object({
  answers: z.record(z.string(), Answer),
  usage: Usage,
  /** Runtime passes run; for operators and benchmarks, not part of the public response. */
  passes: z.number().int().positive(),
});
export type SidecarDecideResponse = z.infer<typeof SidecarDecideResponse>;

export const SIDECAR_PATHS = { health: "/internal/health", decide: "/internal/decide" } as const;
