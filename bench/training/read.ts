/**
 * The training benchmark's reads through a real runtime, each exactly the product's code path (runs in
 * the benchmark only): an example's features as the training worker reads them (execute.ts
 * `exampleFeatures`), a zero-shot answer through a prefix of the served readout's steps
 * (`executeDecision` with `steps`), and served decisions timed through the runtime, zero-shot and
 * with a trained release (a Release carrying the head, as the sidecar serves one).
 *
 *     const f = await readFeatures(client, release, item.item);        // { features, ms }
 *     const z = await readZeroShot(client, release, request, SERVED_STEPS);   // { p, passes, ms }
 */
import { stringifyJson } from "../../contract/json.ts";
import type { Decision } from "../../server-shared/sidecar-protocol.ts";
import { trainedFingerprint, type TrainedHeads } from "../../server-shared/trained.ts";
import type { RuntimeClient } from "../../sidecar/runtime/client.ts";
import { distribution } from "../../sidecar/decide/evaluation.ts";
import { exampleFeatures, executeDecision, SERVED_STEPS, type Steps } from "../../sidecar/decide/execute.ts";
import type { Release } from "../../sidecar/decide/identity.ts";
import type { HeadParams } from "../../server-shared/trained.ts";
import type { Features, Served, ZeroShot } from "./cache.ts";

/** A prefix of the served readout's steps, measured on its own. */
export interface StepPrefix {
  key: string;
  name: string;
  steps: Steps;
}

/**
 * The zero-shot steps a question type runs, cumulatively; the last is SERVED_STEPS itself. Both
 * option orders apply to a small choice only, so for a yes/no question the served readout is the
 * contextual step. The benchmark's release (the runtime's own) carries no calibration, so
 * SERVED_STEPS' calibration step changes nothing here; the release calibration is fitted by the
 * benchmark and applied to the served answers (report.ts), as calibratedAnswer applies a release's.
 */
export function stepPrefixes(type: "noul" | "choice"): StepPrefix[] {
  const rendering: StepPrefix = { key: "rendering", name: "rendering only", steps: { ...SERVED_STEPS, contextual: false, bothOrders: false, calibration: false } };
  if (type === "noul") return [rendering, { key: "served", name: "+ contextual calibration (served)", steps: SERVED_STEPS }];
  return [
    rendering,
    { key: "contextual", name: "+ contextual calibration", steps: { ...SERVED_STEPS, bothOrders: false, calibration: false } },
    { key: "served", name: "+ both option orders (served)", steps: SERVED_STEPS },
  ];
}

export async function readFeatures(client: RuntimeClient, release: Release, request: Decision): Promise<Features> {
  const started = performance.now();
  const { features } = await exampleFeatures(client, release, request);
  return { features, ms: performance.now() - started };
}

export async function readZeroShot(client: RuntimeClient, release: Release, request: Decision, steps: Steps): Promise<ZeroShot> {
  const started = performance.now();
  const execution = await executeDecision(client, release, request, undefined, steps);
  return { p: distribution([...execution.answers.values()][0]!), passes: execution.passes, ms: performance.now() - started };
}

/** A trained release of one question on `base`'s runtime, built as the training worker registers one and the sidecar verifies it. */
export async function trainedRelease(base: Release, request: Decision, head: HeadParams): Promise<Release> {
  const task = { questions: stringifyJson(request.questions) };
  const heads: TrainedHeads = { kind: "hidden_state_head", features: head.mean.length, questions: [head] };
  const fingerprint = await trainedFingerprint(base.fingerprint, task, heads);
  return { id: `bench-trained-${fingerprint.slice(0, 12)}`, fingerprint, runtime: { id: base.id, fingerprint: base.fingerprint }, trained: { task, heads } };
}

/** One decision served by `release` (every step it serves with), timed. */
export async function serve(client: RuntimeClient, release: Release, request: Decision): Promise<Served> {
  const started = performance.now();
  const execution = await executeDecision(client, release, request);
  return { passes: execution.passes, ms: performance.now() - started, at: new Date().toISOString() };
}
