/**
 * The training benchmark's reads through a real runtime, each exactly the product's code path (runs in
 * the benchmark only): an example's features as the training worker reads them (execute.ts
 * `exampleFeatures`), a zero-shot answer through a prefix of the served readout's steps
 * (`executeDecision` with `steps`), and served decisions timed through the runtime, zero-shot and
 * with a trained release (a Release carrying the head, as the sidecar serves one).
 *
 *     const f = await readFeatures(client, release, item.item);        // { features, ms }
 *     const e = await readEmbedding(client, release, item.item);       // { embedding, tokens, ms }
 *     const z = await readZeroShot(client, release, request, SERVED_STEPS);   // { p, passes, ms }
 */
import { stringifyJson } from "../../contract/json.ts";
import type { QuestionType } from "../../contract/calibration.ts";
import type { Decision } from "../../server-shared/sidecar-protocol.ts";
import { trainedFingerprint, type TrainedHeads } from "../../server-shared/trained.ts";
import type { RuntimeClient } from "../../sidecar/runtime/client.ts";
import { distribution } from "../../sidecar/decide/evaluation.ts";
import { executeDecision } from "../../sidecar/decide/execute.ts";
import { SERVED_STEPS, type Steps } from "../../sidecar/decide/steps.ts";
import { exampleFeatures } from "../../sidecar/decide/trained.ts";
import { runtimeOf, verifiedClient, type Release } from "../../sidecar/decide/identity.ts";
import { asText } from "../../sidecar/decide/render.ts";
import type { HeadParams } from "../../server-shared/trained.ts";
import type { Embedding, Features, Served, ZeroShot } from "./cache.ts";

/** A prefix of the zero-shot readout's steps, measured on its own. */
export interface StepPrefix {
  /** Its cache key, named after the steps it runs, so that a change to SERVED_STEPS never reuses another readout's answers. */
  key: string;
  name: string;
  steps: Steps;
  /** The steps SERVED_STEPS runs (before the release's calibration, which the benchmark fits itself). */
  served: boolean;
}

/**
 * The zero-shot steps a question type can run, cumulatively: rendering alone, contextual
 * calibration, and for a choice both option orders. Exactly one of them is the served readout
 * (SERVED_STEPS). The benchmark's release (the runtime's own) carries no calibration, so the
 * calibration step changes nothing here; the release calibration is fitted by the benchmark and
 * applied to the served answers (report.ts), as calibratedAnswer applies a release's.
 */
export function stepPrefixes(type: QuestionType): StepPrefix[] {
  const prefix = (key: string, name: string, steps: Pick<Steps, "contextual" | "bothOrders">): StepPrefix => {
    // Both orders applies to a choice only: a yes/no or a score reads the same either way.
    const served = steps.contextual === SERVED_STEPS.contextual && (type !== "choice" || steps.bothOrders === SERVED_STEPS.bothOrders);
    return { key, name: served ? `${name} (served)` : name, steps: { ...SERVED_STEPS, ...steps, calibration: false }, served };
  };
  const prefixes = [prefix("rendering", "rendering only", { contextual: false, bothOrders: false }), prefix("contextual", "+ contextual calibration", { contextual: true, bothOrders: false })];
  if (type === "choice") prefixes.push(prefix("both-orders", "+ both option orders", { contextual: true, bothOrders: true }));
  if (prefixes.filter((p) => p.served).length !== 1) throw new Error("SERVED_STEPS is not one of the measured step prefixes");
  return prefixes;
}

/** The served readout's prefix. */
export const servedPrefix = (type: QuestionType): StepPrefix => stepPrefixes(type).find((p) => p.served)!;

export async function readFeatures(client: RuntimeClient, release: Release, request: Decision): Promise<Features> {
  const started = performance.now();
  const { features } = await exampleFeatures(client, release, request);
  return { features, ms: performance.now() - started };
}

/** The state's sentence embedding, as exampleFeatures reads it beside the passes (the runtime's `/v1/embed` on the state's text). */
export async function readEmbedding(client: RuntimeClient, release: Release, request: Decision): Promise<Embedding> {
  const started = performance.now();
  const response = await verifiedClient(client, runtimeOf(release)).embed({ text: asText(request.state) });
  return { embedding: response.embedding, tokens: response.tokens, ms: performance.now() - started };
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
