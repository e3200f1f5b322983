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
 * Each step is kept only where it helps on both benchmarks, chosen on their fitting or training parts
 * (what they measured: docs/benchmarks.md, "Which readout steps are served"). Contextual calibration
 * helps on both. Both option orders (a choice of at most LIMITS.choiceBothOrdersMaxOptions options
 * read with its options reversed too, the two readings averaged): a choice's options have no order
 * (key order only breaks ties; ordered alternatives are a score's levels, never reordered), so an
 * answer should not follow where an option is listed, yet reversing the options flips many answers;
 * averaging both orders costs one more content pass per small choice (its content-free readings are
 * kept). Where the options carry an order (periods in time order), averaging hurts: that is what a
 * score question is for.
 */
export const SERVED_STEPS: Steps = { rendering: SERVED_RENDERING, contextual: true, bothOrders: true, calibration: true, shared: true };

/**
 * The steps of a trained release: one pass per question, the served rendering's first content pass,
 * whose hidden state the question's head reads (trained.ts). Training reads its examples with them.
 */
export const TRAINED_STEPS: Steps = { rendering: SERVED_RENDERING, contextual: false, bothOrders: false, calibration: false, shared: true };
