/**
 * The readout's steps after rendering, as switches: the served ones (SERVED_STEPS), a trained
 * release's (TRAINED_STEPS), and the prefixes of them the quality and training benchmarks run beside
 * the served readout to measure what each step adds (`npm run bench:quality`, `npm run bench:training`).
 * Executions (execute.ts) take them; only the benchmarks and the sidecar's own tests name others.
 */
import { SERVED_RENDERING, type Rendering } from "./render.ts";

/** Which readout steps run: the served ones, or a prefix of them for the benchmark. */
export interface Steps {
  rendering: Rendering;
  /** Contextual calibration against a content-free pass. */
  contextual: boolean;
  /** Read a small choice in both option orders and average (render.ts BOTH_ORDERS_MAX_OPTIONS). */
  bothOrders: boolean;
  /** Apply the release's calibration. */
  calibration: boolean;
  /**
   * Evaluate the state once per request and keep content-free readings (content-free.ts). Not a
   * readout step: false is the benchmarks' baseline, every pass evaluated in full.
   */
  shared: boolean;
}

/**
 * Each step is kept only where it helps on both benchmarks. Both option orders is not: on words
 * (`npm run bench:quality`) it added 1.5 points of top-1, and on sentences (`npm run bench:training`,
 * 300 held-out items each) 1.3 on news sections and 14 on newsgroups, but it took State of the Union
 * periods (options in time order) from 0.360 to 0.250, chance, and it doubles a small choice's passes.
 * Contextual calibration helps on both.
 */
export const SERVED_STEPS: Steps = { rendering: SERVED_RENDERING, contextual: true, bothOrders: false, calibration: true, shared: true };

/**
 * The steps of a trained release: one pass per question, the served rendering's first content pass,
 * whose hidden state the question's head reads (trained.ts). Training reads its examples with them.
 */
export const TRAINED_STEPS: Steps = { rendering: SERVED_RENDERING, contextual: false, bothOrders: false, calibration: false, shared: true };
