/**
 * A training file checked before anything is created or uploaded (runs in a user's terminal), with
 * the rules the training worker applies before any pass (contract/training-file.ts): at most 25 MiB
 * and 10,000 examples, one `{custom_id, body, labels}` per line, every line asking the same
 * questions of the same base, a label for every question, enough examples of every outcome. A file
 * the worker would fail is refused here with exit 2 and the line it fails at.
 *
 *     const { bytes, examples, base } = await readTrainingFile("triage.jsonl");
 */
import { LIMITS } from "../../../contract/limits.ts";
import { validateTrainingFile } from "../../../contract/training-file.ts";
import { UsageError } from "./errors.ts";
import { readJobFile } from "./jobs.ts";

export interface TrainingFile {
  bytes: Uint8Array;
  examples: number;
  /** The base model the examples name. */
  base: string;
  /** The task's question ids, in order. */
  questions: string[];
}

export async function readTrainingFile(path: string): Promise<TrainingFile> {
  const bytes = await readJobFile(path, "training", LIMITS.trainingFileBytes);
  const checked = validateTrainingFile(bytes);
  if (!checked.ok) throw new UsageError(`${path}: ${checked.error.message}`);
  return { bytes, examples: checked.examples.length, base: checked.task.model, questions: [...checked.task.questions.keys()] };
}
