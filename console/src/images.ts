/**
 * Images from the browser (runs in the browser): a photo made into a finalized asset, for a decision
 * or a training (created with its SHA-256, PUT through its grant, completed, a completion retried
 * while the service asks to wait), then one decision with an image model's saved question, from the
 * signed-in session (POST /v1/image-decisions).
 */
import { ChoiceAnswer, DecisionResponse } from "../../contract/decision.ts";
import { ImageAsset, type ImagePurpose } from "../../contract/images.ts";
import type { ImageModel } from "../../contract/image-models.ts";
import { stringifyJson } from "../../contract/json.ts";
import { ApiError, call, upload } from "./api.ts";

const hex = (bytes: ArrayBuffer) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Where an upload is: sending its bytes, or being checked and made canonical by the service. */
export type AssetStage = "uploading" | "finalizing";

/** A photo as a finalized asset for `purpose`; its id. A refused photo throws the 422 that says why. */
export async function uploadAsset(file: File, token: string, purpose: ImagePurpose, stage: (stage: AssetStage) => void = () => {}): Promise<string> {
  const bytes = await file.arrayBuffer();
  stage("uploading");
  const created = ImageAsset.parse(
    (await call("/v1/image-assets", token, { body: JSON.stringify({ purpose, filename: file.name, source_bytes: bytes.byteLength, sha256: hex(await crypto.subtle.digest("SHA-256", bytes)) }) })).plain,
  );
  await upload(created.upload!.url, created.upload!.headers, new Blob([bytes]), () => {});
  stage("finalizing");
  for (let attempt = 1; ; attempt++) {
    try {
      return ImageAsset.parse((await call(`/v1/image-assets/${created.id}/complete`, token, { method: "POST" })).plain).id;
    } catch (err) {
      // Busy: another completion of this asset, or the account's others (two at a time), are running.
      const retry = err instanceof ApiError && (err.status === 503 || err.code === "asset_finalizing" || err.code === "image_completion_limit");
      if (!retry || attempt >= 5) throw err;
      await wait(1000 * attempt);
    }
  }
}

/** A photo as a finalized prediction asset; its id. */
export const uploadPhoto = (file: File, token: string): Promise<string> => uploadAsset(file, token, "prediction");

export interface ImageAnswer {
  question: string;
  answer: ChoiceAnswer;
  /** The unknown mass is the largest: a person should look ("Needs review"). */
  needsReview: boolean;
}

/** One decision on a finalized asset with `model`'s saved question, exactly as it was saved. */
export async function decideImage(model: ImageModel, assetId: string, token: string): Promise<ImageAnswer> {
  const body = `{"model":${JSON.stringify(model.id)},"state":"","images":[{"asset_id":${JSON.stringify(assetId)}}],"questions":{${JSON.stringify(model.task.question_id)}:${stringifyJson(model.task.question)}}}`;
  const response = DecisionResponse.parse((await call("/v1/image-decisions", token, { body })).body);
  const [question, answer] = [...response.answers][0]!;
  if (answer.type !== "choice") throw new Error("the service answered an image decision with no choice");
  const unknown = answer.unknown_probability ?? 0;
  // The known answers' probabilities are conditional on a known answer: the largest known mass is theirs times (1 - unknown).
  const largestKnown = Math.max(...answer.probabilities.values()) * (1 - unknown);
  return { question, answer, needsReview: unknown >= largestKnown };
}
