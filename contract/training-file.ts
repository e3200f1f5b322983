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

/** What every example asks: the base model and the questions, in order. */
export interface TrainingTask {
  model: string;
  questions: Questions;
}

export interface TrainingExample {
  /** 1-based line number in the file. */
  line: number;
  customId: string;
  /** The example's state, as JSON text (key order kept). */
  state: string;
  /** Per question id, in the task's order: the index of the true outcome (noul: 0 true, 1 false; choice: option index; score: level). */
  outcomes: number[];
}

export type TrainingValidation = { ok: true; task: TrainingTask; examples: TrainingExample[] } | { ok: false; error: FileError };

/** A question's outcomes in order, as labels name them: [true, false], the option names, or the levels 0..n-1. */
export function outcomesOf(question: Question): (boolean | string | number)[] {
  if (question.type === "noul") return [true, false];
  if (question.type === "choice") return [...question.criteria.keys()];
  return question.criteria.map((_, level) => level);
}

/** The index of `label` among the question's outcomes; a message saying what is wrong otherwise. */
export function outcomeIndex(question: Question, label: unknown): number | string {
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
    const violation = requestViolation(request.data);
    if (violation) return fileError("invalid_example", `line ${line}: body: ${violation}`, line);

    const { model, questions, state } = request.data;
    const text = stringifyJson(questions);
    if (task === null) task = { model, questions, text, line };
    else if (model !== task.model) {
      return fileError("task_mismatch", `line ${line}: body.model ${JSON.stringify(model.slice(0, 40))} is not line ${task.line}'s ${JSON.stringify(task.model.slice(0, 40))}: every example trains the same base`, line);
    } else if (text !== task.text) {
      return fileError("task_mismatch", `line ${line}: ${taskDifference(task.questions, questions)} (every line asks line ${task.line}'s questions, in order)`, line);
    }

    const outcomes = labelled(task.questions, labels);
    if (typeof outcomes === "string") return fileError("invalid_label", `line ${line}: ${outcomes}`, line);
    examples.push({ line, customId, state: stringifyJson(state), outcomes });
  }
  const found = task!;
  const short = tooFew(found.questions, examples);
  if (short) return fileError("too_few_examples", short, null);
  return { ok: true, task: { model: found.model, questions: found.questions }, examples };
}

/** Each question's outcome index from `labels` (exactly the task's question ids), or what is wrong. */
function labelled(questions: Questions, labels: unknown): number[] | string {
  if (!(labels instanceof Map)) return "labels must be a JSON object mapping each question id to its answer";
  for (const id of labels.keys()) if (!questions.has(id)) return `labels: ${JSON.stringify(String(id).slice(0, 40))} is not a question of the task`;
  const outcomes: number[] = [];
  for (const [id, question] of questions) {
    if (!labels.has(id)) return `labels: question ${JSON.stringify(id.slice(0, 40))} has no label`;
    const index = outcomeIndex(question, labels.get(id));
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
function tooFew(questions: Questions, examples: TrainingExample[]): string | null {
  const min = LIMITS.trainingExamplesPerOutcome;
  for (const [q, [id, question]] of [...questions].entries()) {
    const counts = outcomesOf(question).map(() => 0);
    for (const example of examples) counts[example.outcomes[q]!]! += 1;
    const index = counts.findIndex((count) => count < min);
    if (index >= 0) {
      const outcome = JSON.stringify(outcomesOf(question)[index]);
      return `question ${JSON.stringify(id.slice(0, 40))}: ${counts[index]} example(s) of ${outcome}; every outcome needs at least ${min}`;
    }
  }
  return null;
}
