/**
 * A training's candidate fitted off the sidecar's event loop (the entry of a Bun worker thread;
 * sidecar/train/fitting.ts starts it): the k-fold evaluation fits hundreds of heads, seconds to
 * minutes of arithmetic that would otherwise hold up real-time decisions and the job's lease renewals.
 */
import { candidateOf, type Candidate } from "./candidate.ts";
import type { FitRequest } from "./fitting.ts";

declare const self: Worker;

self.onmessage = (event: MessageEvent<FitRequest>) => {
  const { task, modality, examples, options } = event.data;
  try {
    const candidate: Candidate | null = candidateOf(task, modality, examples, options);
    self.postMessage({ ok: true, candidate });
  } catch (err) {
    self.postMessage({ ok: false, message: err instanceof Error ? err.message : String(err) });
  }
};
