/**
 * A training file: labelled examples of one decision, the task a trained model will answer. The
 * worker validates it before any pass, and the command-line tool before it uploads, so both refuse
 * the same files with the same error naming the first bad line.
 *
 *     {"custom_id": "t-1", "body": {"state": "...", "questions": {"refund": {"type": "noul"}}}, "labels": {"refund": true}}
 *
 * - The file follows jsonl.ts's rules, within LIMITS.trainingFileBytes and trainingFileExamples.
 * - `body` is a decision request the real-time route would take; `model` names the base (default
 *   the shared alias). Every line asks the same questions (ids, types, instructions, criteria, in
 *   order) of the same base: the first line's are the task.
 * - `labels` maps every question id of the task to its answer: true or false (noul), an option name
 *   (choice), a zero-based level (score).
 * - Every outcome of every question (true and false, each option, each level) needs at least
 *   LIMITS.trainingExamplesPerOutcome examples, so that the held-out part can measure each.
 * - An image training file (its first line has `images`): every line has one image, named by a
 *   ready training asset's id, and asks the same one `choice` question (contract/images.ts
 *   imageRequestViolation). A label is an answer's name, or null for an image of none of them: the
 *   "other" outcome, from which the model learns its unknown mass, needs as many examples as each
 *   answer.
 *
 *     {"custom_id": "i-1", "body": {"model": "svc-image", "state": "", "images": [{"asset_id": "…"}],
 *      "questions": {"digit": {"type": "choice", "criteria": {"zero": null, "one": null}}}}, "labels": {"digit": null}}
 *
 *     const checked = validateTrainingFile(bytes);
 *     if (!checked.ok) fail(checked.error);      // {code, message, line}
 *     else train(checked.task, checked.examples);
 */
import { z } from "zod";
import { requestViolation } from "./budget.ts";
import { DecisionRequest, type Question, type Questions as QuestionsSchema } from "./decision.ts";
import { fields, JsonValue } from "./fields.ts";
import { describeIssues, formatPath, stringifyJson } from "./json.ts";
import { fileError, readJsonl, type FileError } from "./jsonl.ts";
import { LIMITS } from "./limits.ts";
import { CUSTOM_ID_MAX } from "./batches.ts";
import { imageRequestViolation } from "./images.ts";

type Questions = z.infer<typeof QuestionsSchema>;

/** One line as a client writes it; `body` and `labels` are checked against the task afterwards. */
const TrainingLine = fields({
  custom_id: z
    .string({ error: "custom_id must be a string" })
    .min(1, "custom_id must not be empty")
    .max(CUSTOM_ID_MAX, `custom_id must be at most ${CUSTOM_ID_MAX} characters`),
  body: JsonValue,
  labels: JsonValue,
});

/** What every example asks: the base model and the questions, in order, about a text or an image. */
export interface TrainingTask {
  model: string;
  questions: Questions;
  modality: "text" | "image";
}

export interface TrainingExample {
  /** 1-based line number in the file. */
  line: number;
  customId: string;
  /** The example's state, as JSON text (key order kept). */
  state: string;
  /**
   * Per question id, in the task's order: the index of the true outcome (noul: 0 true, 1 false;
   * choice: option index; score: level; an image's "other": the number of options).
   */
  outcomes: number[];
  /** An image example's asset; null for text. */
  assetId: string | null;
}

export type TrainingValidation = { ok: true; task: TrainingTask; examples: TrainingExample[] } | { ok: false; error: FileError };

/** A question's outcomes in order, as labels name them: [true, false], the option names, or the levels 0..n-1. */
export function outcomesOf(question: Question): (boolean | string | number)[] {
  if (question.type === "noul") return [true, false];
  if (question.type === "choice") return [...question.criteria.keys()];
  return question.criteria.map((_, level) => level);
}

/** The outcomes a trained model of this modality tells apart: an image question's answers, then "other" (null). */
export function trainingOutcomes(question: Question, modality: "text" | "image"): (boolean | string | number | null)[] {
  return modality === "image" ? [...outcomesOf(question), null] : outcomesOf(question);
}

/** The index of `label` among the question's outcomes; a message saying what is wrong otherwise. */
export function outcomeIndex(question: Question, label: unknown, modality: "text" | "image" = "text"): number | string {
  if (modality === "image" && question.type === "choice") {
    if (label === null) return question.criteria.size;
    const index = typeof label === "string" ? [...question.criteria.keys()].indexOf(label) : -1;
    return index >= 0 ? index : "an image question's label must be one of its answer names, or null for an image of none of them";
  }
  if (question.type === "noul") return typeof label === "boolean" ? (label ? 0 : 1) : "a noul question's label must be true or false";
  if (question.type === "choice") {
    const index = typeof label === "string" ? [...question.criteria.keys()].indexOf(label) : -1;
    return index >= 0 ? index : "a choice question's label must be one of its option names";
  }
  const levels = question.criteria.length;
  return typeof label === "number" && Number.isInteger(label) && label >= 0 && label < levels
    ? label
    : `a score question's label must be a level from 0 to ${levels - 1}`;
}

export function validateTrainingFile(bytes: Uint8Array): TrainingValidation {
  const read = readJsonl(bytes, { maxBytes: LIMITS.trainingFileBytes, maxLines: LIMITS.trainingFileExamples, holds: "a training file", unit: "examples" });
  if (!read.ok) return read;
  let task: (TrainingTask & { text: string; line: number }) | null = null;
  const examples: TrainingExample[] = [];
  const seen = new Map<string, number>();
  for (const { line, value } of read.lines) {
    const envelope = TrainingLine.safeParse(value);
    if (!envelope.success) return fileError("invalid_example", `line ${line}: ${describeIssues(envelope.error)}`, line);
    const { custom_id: customId, body, labels } = envelope.data;
    const first = seen.get(customId);
    if (first !== undefined) return fileError("duplicate_custom_id", `line ${line}: custom_id ${JSON.stringify(customId.slice(0, 40))} is also on line ${first}`, line);
    seen.set(customId, line);

    // The same refusals as the real-time route, with the body's own paths.
    const request = DecisionRequest.safeParse(body);
    if (!request.success) return fileError("invalid_example", `line ${line}: body: ${describeIssues(request.error)}`, line);
    const modality = request.data.images === undefined ? "text" : "image";
    const violation = modality === "image" ? imageRequestViolation(request.data) : requestViolation(request.data);
    if (violation) return fileError("invalid_example", `line ${line}: body: ${violation}`, line);

    const { model, questions, state } = request.data;
    const text = stringifyJson(questions);
    if (task === null) task = { model, questions, modality, text, line };
    else if (modality !== task.modality) {
      const has = (m: string) => (m === "image" ? "has an image" : "has no image");
      return fileError("task_mismatch", `line ${line}: this example ${has(modality)}; line ${task.line}'s ${has(task.modality)}: a training file is all text or all images`, line);
    } else if (model !== task.model) {
      return fileError("task_mismatch", `line ${line}: body.model ${JSON.stringify(model.slice(0, 40))} is not line ${task.line}'s ${JSON.stringify(task.model.slice(0, 40))}: every example trains the same base`, line);
    } else if (text !== task.text) {
      return fileError("task_mismatch", `line ${line}: ${taskDifference(task.questions, questions)} (every line asks line ${task.line}'s questions, in order)`, line);
    }

    const outcomes = labelled(task.questions, labels, task.modality);
    if (typeof outcomes === "string") return fileError("invalid_label", `line ${line}: ${outcomes}`, line);
    examples.push({ line, customId, state: stringifyJson(state), outcomes, assetId: request.data.images?.[0]?.asset_id ?? null });
  }
  const found = task!;
  const short = tooFew(found.questions, examples, found.modality);
  if (short) return fileError("too_few_examples", short, null);
  return { ok: true, task: { model: found.model, questions: found.questions, modality: found.modality }, examples };
}

/** Each question's outcome index from `labels` (exactly the task's question ids), or what is wrong. */
function labelled(questions: Questions, labels: unknown, modality: "text" | "image"): number[] | string {
  if (!(labels instanceof Map)) return "labels must be a JSON object mapping each question id to its answer";
  for (const id of labels.keys()) if (!questions.has(id)) return `labels: ${JSON.stringify(String(id).slice(0, 40))} is not a question of the task`;
  const outcomes: number[] = [];
  for (const [id, question] of questions) {
    if (!labels.has(id)) return `labels: question ${JSON.stringify(id.slice(0, 40))} has no label`;
    const index = outcomeIndex(question, labels.get(id), modality);
    if (typeof index === "string") return `${formatPath(["labels", id.slice(0, 40)])}: ${index}`;
    outcomes.push(index);
  }
  return outcomes;
}

/** Says which question differs from the task's first (its id, position or definition). */
export function taskDifference(task: Questions, questions: Questions): string {
  const expected = [...task.keys()];
  const actual = [...questions.keys()];
  if (expected.join("\u0000") !== actual.join("\u0000")) {
    return `the question ids are ${JSON.stringify(actual.slice(0, 10))}, not ${JSON.stringify(expected.slice(0, 10))}`;
  }
  const id = expected.find((key) => stringifyJson(task.get(key)) !== stringifyJson(questions.get(key)))!;
  return `question ${JSON.stringify(id.slice(0, 40))} is not asked as on the first line (its type, instructions or criteria differ)`;
}

/** The first outcome with fewer examples than LIMITS.trainingExamplesPerOutcome, as a message; null when none. */
function tooFew(questions: Questions, examples: TrainingExample[], modality: "text" | "image"): string | null {
  const min = LIMITS.trainingExamplesPerOutcome;
  for (const [q, [id, question]] of [...questions].entries()) {
    const outcomes = trainingOutcomes(question, modality);
    const counts = outcomes.map(() => 0);
    for (const example of examples) counts[example.outcomes[q]!]! += 1;
    const index = counts.findIndex((count) => count < min);
    if (index >= 0) {
      const outcome = outcomes[index] === null ? "null (an image of none of the answers)" : JSON.stringify(outcomes[index]);
      return `question ${JSON.stringify(id.slice(0, 40))}: ${counts[index]} example(s) of ${outcome}; every outcome needs at least ${min}`;
    }
  }
  return null;
}
