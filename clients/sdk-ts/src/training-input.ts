/**
 * A training file as bytes, checked: JSONL written from examples, a JSONL file read from a path, or
 * bytes given as they are. It is validated with the service's own rules (contract/training-file.ts,
 * which the training worker applies before any pass), so a file the worker would fail is refused
 * here, naming its first bad line, before a training exists; the check also tells which base model
 * the examples name, the one the training must be created for.
 *
 *     const { bytes, base, examples } = await encodeTrainingFile("triage.jsonl", "svc-shared");
 */
import { readFile } from "node:fs/promises";
import { stringifyJson } from "../../../contract/json.ts";
import { LIMITS } from "../../../contract/limits.ts";
import { validateTrainingFile } from "../../../contract/training-file.ts";
import type { DecisionRequest } from "./decisions.ts";
import { InputError } from "./errors.ts";

/**
 * One labelled example: `body` a decision request (every example asks the same questions of the
 * same base), `labels` each question id's answer: true or false (noul), an option name (choice), a
 * zero-based level (score); for an image example, an answer's name or null (an image of none of them).
 */
export interface TrainingExample {
  custom_id: string;
  body: DecisionRequest;
  labels: Readonly<Record<string, boolean | string | number | null>>;
}

/** Examples, the path of a JSONL training file, or the file's bytes. */
export type TrainingInput = readonly TrainingExample[] | string | Uint8Array;

export interface EncodedTrainingFile {
  bytes: Uint8Array;
  /** The base model every example names (`body.model`, the shared alias when absent). */
  base: string;
  examples: number;
}

/** The file's bytes, checked; examples without a `model` get `defaultModel`. Throws InputError. */
export async function encodeTrainingFile(input: TrainingInput, defaultModel: string): Promise<EncodedTrainingFile> {
  let bytes: Uint8Array;
  if (typeof input === "string") {
    try {
      bytes = await readFile(input);
    } catch (err) {
      throw new InputError(`cannot read the training file ${input}: ${(err as Error).message}`, { cause: err });
    }
  } else if (input instanceof Uint8Array) {
    bytes = input;
  } else if (Array.isArray(input)) {
    bytes = encodeExamples(input, defaultModel);
  } else {
    throw new InputError("a training file is an array of {custom_id, body, labels} examples, the path of a JSONL file, or a Uint8Array");
  }
  const checked = validateTrainingFile(bytes);
  if (!checked.ok) throw new InputError(`the training file${typeof input === "string" ? ` ${input}` : ""}: ${checked.error.message}`);
  return { bytes, base: checked.task.model, examples: checked.examples.length };
}

function encodeExamples(examples: readonly TrainingExample[], defaultModel: string): Uint8Array {
  if (examples.length > LIMITS.trainingFileExamples) {
    throw new InputError(`${examples.length} examples; a training file holds at most ${LIMITS.trainingFileExamples}`);
  }
  const lines = examples.map((example) => {
    if (example === null || typeof example !== "object" || !("custom_id" in example) || !("body" in example) || !("labels" in example)) {
      throw new InputError("each training example is an object with custom_id, body and labels");
    }
    const { custom_id, body, labels, ...rest } = example;
    return stringifyJson({ custom_id, body: { ...body, model: body.model ?? defaultModel }, labels, ...rest });
  });
  return new TextEncoder().encode(lines.join("\n") + "\n");
}
