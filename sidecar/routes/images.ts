/**
 * The image routes (runs in the sidecar; only the edge calls them, with the sidecar secret): a
 * decision on an image asset by a trained image model, in the real-time lane, and an upload's
 * preprocessing into its canonical image (images/finalize.ts).
 *
 *   POST /internal/images/decide     SidecarImageDecideRequest -> SidecarDecideResponse
 *   POST /internal/images/preprocess PreprocessImageRequest    -> PreprocessImageResponse
 */
import { Hono, type Context } from "hono";
import { readJson } from "../../server-shared/body.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { orderedJson } from "../../server-shared/http.ts";
import { PreprocessImageRequest, SIDECAR_BODY, SIDECAR_PATHS, SidecarImageDecideRequest, type SidecarDecideResponse } from "../../server-shared/sidecar-protocol.ts";
import { SERVER_TIMING_HEADER, Timings } from "../../server-shared/timing.ts";
import { savedQuestions } from "../../server-shared/trained.ts";
import type { SidecarDeps } from "../app.ts";
import { runtimeOf } from "../decide/identity.ts";
import type { RegistryEntries } from "../decide/registry-entries.ts";
import { checkImageTask, imageAnswer, imageUsage, readImageFeatures } from "../images/decide.ts";
import { finalizeImage } from "../images/finalize.ts";
import { runtimeClientFor } from "../runtime/client.ts";
import { applyHead } from "../train/head.ts";

export function imageRoutes(deps: SidecarDeps, registry: RegistryEntries): Hono {
  const app = new Hono();
  app.post(SIDECAR_PATHS.imageDecide, async (c) => {
    try {
      const answered = await imageDecision(c);
      deps.metrics?.imageDecisions.inc({ outcome: "answered" });
      return answered;
    } catch (err) {
      deps.metrics?.imageDecisions.inc({ outcome: "error" });
      throw err;
    }
  });

  async function imageDecision(c: Context): Promise<Response> {
    const call = await readJson(c, SidecarImageDecideRequest, SIDECAR_BODY);
    const timings = new Timings();
    const { entry, release } = await timings.time("registry", () => registry.get(call.release));
    if (entry.modality !== "image" || !release.trained) throw new ServiceError("invalid_request", `the model ${JSON.stringify(release.id)} is not a trained image model`);
    const { id, question } = checkImageTask(savedQuestions(release.trained.task), call.request.questions);
    const client = runtimeClientFor(entry, deps.secrets);
    const signal = c.req.raw.signal;
    const queued = performance.now();
    const read = await deps.lanes.run(
      "realtime",
      () => {
        timings.add("queue", performance.now() - queued);
        const image = { image: call.image.grant, bytes: call.image.bytes, sha256: call.image.sha256 };
        return timings.time("image", () => readImageFeatures(client, runtimeOf(release), image, signal));
      },
      signal,
    );
    const answer = imageAnswer(question, applyHead(release.trained.heads.questions[0]!, read.features));
    const usage = imageUsage(read.visualTokens, call.request.state, call.request.questions);
    deps.usage.record({ accountId: call.account_id, keyId: call.key_id, releaseId: call.release.id, source: "realtime", requestId: call.request_id, usage });
    c.header(SERVER_TIMING_HEADER, timings.header());
    deps.afterImageAnswer?.();
    return orderedJson(c, { answers: new Map([[id, answer]]), usage, passes: 1 } satisfies SidecarDecideResponse);
  }

  app.post(SIDECAR_PATHS.preprocessImage, async (c) => {
    const request = await readJson(c, PreprocessImageRequest, { maxBytes: 16 * 1024 });
    return c.json(await finalizeImage(request, { holdMs: deps.imageHoldMs ?? 0 }));
  });

  return app;
}
