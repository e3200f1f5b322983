/**
 * candidateOf in a worker thread of its own (runs in the sidecar's training worker, under Bun): the
 * fitting runs on another core while the event loop goes on serving decisions and renewing leases.
 * The thread is ended when the step is abandoned (`signal`), and after each fit.
 *
 *     const candidate = await fitCandidate(task, "text", examples, { seed: claim.id, nested: true }, signal);
 */
import type { ReadExample } from "../../server-shared/jobs/trainings.ts";
import { candidateOf, type Candidate } from "./candidate.ts";

export interface FitRequest {
  task: Parameters<typeof candidateOf>[0];
  modality: Parameters<typeof candidateOf>[1];
  examples: readonly ReadExample[];
  options: Parameters<typeof candidateOf>[3];
}

type FitReply = { ok: true; candidate: Candidate | null } | { ok: false; message: string };

export function fitCandidate(task: FitRequest["task"], modality: FitRequest["modality"], examples: readonly ReadExample[], options: FitRequest["options"], signal?: AbortSignal): Promise<Candidate | null> {
  signal?.throwIfAborted();
  // The sidecar runs under Bun, whose worker threads run TypeScript. TrainingSteps hosted by Node
  // (a test that runs a second sidecar inside vitest) has no such worker, and fits inline.
  if (typeof Bun === "undefined") return Promise.resolve(candidateOf(task, modality, examples, options));
  const thread = new Worker(new URL("./fit-thread.ts", import.meta.url).href);
  return new Promise<Candidate | null>((resolve, reject) => {
    const abandon = () => {
      void thread.terminate();
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", abandon, { once: true });
    const settle = () => {
      signal?.removeEventListener("abort", abandon);
      void thread.terminate();
    };
    thread.onmessage = (event: MessageEvent<FitReply>) => {
      settle();
      if (event.data.ok) resolve(event.data.candidate);
      else reject(new Error(`fitting the candidate failed: ${event.data.message}`));
    };
    thread.onerror = (event: ErrorEvent) => {
      settle();
      reject(new Error(`the fitting thread failed: ${event.message}`));
    };
    const request: FitRequest = { task, modality, examples, options };
    thread.postMessage(request);
  });
}
