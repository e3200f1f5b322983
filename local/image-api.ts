/**
 * The image routes as a script calls them (developer machine, tests, benchmarks): an asset uploaded
 * in one call (create, PUT, complete), and an image model trained from labelled images through the
 * ordinary training routes. Any refusal throws, naming the step and the server's answer.
 *
 *     const id = await uploadImage(base, token, png, "training");
 *     const training = await trainImageModel(base, userToken, [{ customId: "c-1", assetId: id, label: "circle" }, ...], question);
 */
import { createHash } from "node:crypto";
import { ImageAsset } from "../contract/images.ts";
import { Training } from "../contract/trainings.ts";
import { IMAGE_BASE_ALIAS } from "../contract/limits.ts";

async function call(base: string, token: string, path: string, body?: unknown): Promise<{ status: number; json: unknown; retryAfterMs: number }> {
  const res = await fetch(`${base}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json().catch(() => null), retryAfterMs: Number(res.headers.get("retry-after-ms") ?? 1000) };
}

/** What a completion may be asked to wait for: another completion of the asset, or of the account's others (LIMITS.imageCompletionsAtOnce). */
const COMPLETION_WAITS = new Set(["asset_finalizing", "image_completion_limit"]);

/** Completes an uploaded asset, waiting what the service asks while it is busy (at most a minute). */
async function complete(base: string, token: string, id: string): Promise<{ status: number; json: unknown }> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const done = await call(base, token, `/v1/image-assets/${id}/complete`, {});
    const code = (done.json as { error?: { code?: string } } | null)?.error?.code;
    if (!code || !COMPLETION_WAITS.has(code) || Date.now() >= deadline) return done;
    await new Promise((resolve) => setTimeout(resolve, done.retryAfterMs));
  }
}

function refused(step: string, status: number, body: unknown): Error {
  return new Error(`${step}: HTTP ${status} ${typeof body === "string" ? body : JSON.stringify(body)}`);
}

/** A ready asset of `png`, uploaded with `token` (an API key where IMAGE_API is on, a user token where IMAGE_BROWSER is); its id. */
export async function uploadImage(base: string, token: string, png: Uint8Array, purpose: "prediction" | "training", filename = "image.png"): Promise<string> {
  const sha256 = createHash("sha256").update(png).digest("hex");
  const created = await call(base, token, "/v1/image-assets", { purpose, filename, source_bytes: png.byteLength, sha256 });
  if (created.status !== 201) throw refused("creating an image asset", created.status, created.json);
  const asset = ImageAsset.parse(created.json);
  const put = await fetch(asset.upload!.url, { method: "PUT", headers: asset.upload!.headers, body: png });
  if (!put.ok) throw refused("uploading an image", put.status, await put.text());
  const done = await complete(base, token, asset.id);
  if (done.status !== 200) throw refused("completing an image asset", done.status, done.json);
  return asset.id;
}

export interface LabelledImage {
  customId: string;
  assetId: string;
  /** An answer's name, or null for an image of none of them. */
  label: string | null;
}

/** The training file of one question about labelled images, on the image backbone. */
export function imageTrainingFile(images: LabelledImage[], questions: Record<string, unknown>): string {
  const [questionId] = Object.keys(questions);
  return (
    images
      .map(({ customId, assetId, label }) =>
        JSON.stringify({ custom_id: customId, body: { model: IMAGE_BASE_ALIAS, state: "", images: [{ asset_id: assetId }], questions }, labels: { [questionId!]: label } }),
      )
      .join("\n") + "\n"
  );
}

/** Creates, uploads and submits an image training with a user token, and waits until it ends (or `timeoutMs`); its last status. */
export async function trainImageModel(base: string, userToken: string, file: string, timeoutMs = 300_000): Promise<Training> {
  const created = await call(base, userToken, "/v1/trainings", {
    idempotency_key: `image-${Date.now()}-${Math.random().toString(36).slice(2)}`,
    input_bytes: Buffer.byteLength(file),
    model: IMAGE_BASE_ALIAS,
  });
  if (created.status !== 201) throw refused("creating the training", created.status, created.json);
  let training = Training.parse(created.json);
  const put = await fetch(training.upload!.url, { method: "PUT", headers: training.upload!.headers, body: file });
  if (!put.ok) throw refused("uploading the training file", put.status, await put.text());
  const submitted = await call(base, userToken, `/v1/trainings/${training.id}/submit`, {});
  if (submitted.status !== 200) throw refused("submitting the training", submitted.status, submitted.json);
  const deadline = Date.now() + timeoutMs;
  while (training.finished_at === null && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    training = Training.parse((await call(base, userToken, `/v1/trainings/${training.id}`)).json);
  }
  return training;
}
