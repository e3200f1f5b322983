/**
 * An image model's training as the console assembles it (runs in the browser; pure, so the tests
 * read it too): one choice question, its answers, and ready training assets per answer and for "none
 * of these", made into the training file contract/training-file.ts describes (one line per image, an
 * answer's name as its label, null for none of them), on the image base (IMAGE_BASE_ALIAS). What is
 * still missing before a training can start is said in a sentence, with the contract's limits.
 *
 *     const missing = missingForTraining(task, images);   // "circle needs at least 10 photos (3 ready)"
 *     if (!missing) start(imageTrainingFile(task, images));
 */
import { CUSTOM_ID_MAX } from "../../contract/batches.ts";
import { OptionName, QuestionId } from "../../contract/decision.ts";
import { stringifyJson } from "../../contract/json.ts";
import { IMAGE_BASE_ALIAS, LIMITS } from "../../contract/limits.ts";

/** The question a model will answer: its id, what it asks (may be empty), and its answers' names in order. */
export interface ImageTask {
  question: string;
  instructions: string;
  answers: string[];
}

/** Where a picked image is, from picked to a ready asset (or failed, with the reason). */
export type ImageStage = "waiting" | "uploading" | "finalizing" | "ready" | "failed";

/** One picked image: the answer it shows (its index in the task's answers; null: none of them). */
export interface PickedImage {
  answer: number | null;
  filename: string;
  stage: ImageStage;
  assetId: string | null;
}

/** The question exactly as every line (and every later decision with the model) asks it: answer order kept. */
export function imageQuestion(task: ImageTask): Map<string, unknown> {
  const question = new Map<string, unknown>([["type", "choice"]]);
  if (task.instructions.trim()) question.set("instructions", task.instructions.trim());
  question.set("criteria", new Map(task.answers.map((name) => [name.trim(), null])));
  return question;
}

/** The training file: one line per ready image, its label the answer's name (null for none of them). */
export function imageTrainingFile(task: ImageTask, images: PickedImage[]): string {
  const questions = stringifyJson(new Map([[task.question.trim(), imageQuestion(task)]]));
  const id = JSON.stringify(task.question.trim());
  return images
    .filter((image) => image.stage === "ready")
    .map((image, i) => {
      const label = image.answer === null ? null : task.answers[image.answer]!.trim();
      const customId = `${i + 1}-${label ?? "none"}-${image.filename}`.slice(0, CUSTOM_ID_MAX);
      const body = `{"model":${JSON.stringify(IMAGE_BASE_ALIAS)},"state":"","images":[{"asset_id":${JSON.stringify(image.assetId)}}],"questions":${questions}}`;
      return `{"custom_id":${JSON.stringify(customId)},"body":${body},"labels":{${id}:${JSON.stringify(label)}}}\n`;
    })
    .join("");
}

/** What stops a training from starting, in a sentence; null when nothing does. */
export function missingForTraining(task: ImageTask, images: PickedImage[]): string | null {
  if (!QuestionId.safeParse(task.question.trim()).success) return "Name the question.";
  const names = task.answers.map((name) => name.trim());
  const { min, max } = LIMITS.imageOutcomes;
  if (names.length < min || names.length > max) return `A question has ${min} to ${max} answers.`;
  const unnamed = names.findIndex((name) => !OptionName.safeParse(name).success);
  if (unnamed >= 0) return `Name answer ${unnamed + 1}.`;
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) return `Two answers are named ${twice}: each answer needs its own name.`;
  if (task.instructions.trim().length > LIMITS.imageQuestionTextChars) return `The instructions are at most ${LIMITS.imageQuestionTextChars} characters.`;
  const pending = images.filter((image) => image.stage !== "ready" && image.stage !== "failed").length;
  if (pending > 0) return `${pending} photo${pending === 1 ? " is" : "s are"} still uploading.`;
  if (images.some((image) => image.stage === "failed")) return "Some photos could not be uploaded: retry them, or leave them out.";
  const least = LIMITS.trainingExamplesPerOutcome;
  const groups: (number | null)[] = [...names.keys(), null];
  for (const group of groups) {
    const ready = images.filter((image) => image.answer === group && image.stage === "ready").length;
    if (ready < least) return `${group === null ? "None of these" : names[group]} needs at least ${least} photos (${ready} ready).`;
  }
  if (images.length > LIMITS.trainingFileExamples) return `A training takes at most ${LIMITS.trainingFileExamples.toLocaleString("en-US")} photos.`;
  return null;
}
