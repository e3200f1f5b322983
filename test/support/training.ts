/**
 * Training helpers for tests on the shared stack: labelled files, a training created, uploaded and submitted through the real edge with a user token, and its status
 * polled.
 */
import { randomBytes } from "node:crypto";
import { expect } from "vitest";
import { Training } from "../../contract/trainings.ts";
import { call, remember, type newAccount } from "./api.ts";

export type Account = Awaited<ReturnType<typeof newAccount>>;

const ANIMALS = ["cat", "dog", "horse", "rabbit", "parrot", "cow", "goat", "duck", "sheep", "donkey", "hamster", "pig"];
const VEHICLES = ["truck", "bus", "train", "bicycle", "motorbike", "tractor", "van", "ferry", "scooter", "taxi", "tram", "lorry"];
const TEMPLATES = ["The {x} was standing near the old barn this morning.", "Everyone in the village talked about the {x} that arrived yesterday."];

export interface LabelledSentence {
  text: string;
  /** true: an animal; false: a vehicle. */
  animal: boolean;
}

/** Sentences that differ only by an animal or a vehicle: trivial to learn from the base's hidden state. */
export function animalSentences(): LabelledSentence[] {
  return TEMPLATES.flatMap((template) => [
    ...ANIMALS.map((x) => ({ text: template.replace("{x}", x), animal: true })),
    ...VEHICLES.map((x) => ({ text: template.replace("{x}", x), animal: false })),
  ]);
}

/** A yes/no training file over `sentences`, each labelled by `label` (by default: is it an animal), with fixed custom_ids. */
export async function noulFile(question: Record<string, unknown>, sentences: LabelledSentence[], label: (s: LabelledSentence) => boolean = (s) => s.animal): Promise<string> {
  const lines: string[] = [];
  for (const animal of [true, false]) {
    sentences
      .filter((s) => s.animal === animal)
      .forEach((s, i) => lines.push(JSON.stringify({ custom_id: `${animal ? "animal" : "vehicle"}-${i}`, body: { state: s.text, questions: { q: question } }, labels: { q: label(s) } })));
  }
  return lines.join("\n") + "\n";
}

/** The same file with every example naming `model` as its base. */
export const withModel = (file: string, model: string) =>
  file
    .trimEnd()
    .split("\n")
    .map((line) => {
      const example = JSON.parse(line);
      return JSON.stringify({ ...example, body: { model, ...example.body } });
    })
    .join("\n") + "\n";

/** Creates (with `options`, more fields of the create), uploads and submits a training; returns its status after submit. */
export async function submitTraining(account: Account, file: string, model?: string, options: Record<string, unknown> = {}): Promise<Training> {
  const created = await call<Training>("/v1/trainings", {
    token: account.userToken,
    body: { idempotency_key: `t-${randomBytes(6).toString("hex")}`, input_bytes: Buffer.byteLength(file), ...(model ? { model } : {}), ...options },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const training = Training.parse(created.body);
  remember(new URL(training.upload!.url).searchParams.get("X-Amz-Signature")!);
  const put = await fetch(training.upload!.url, { method: "PUT", headers: training.upload!.headers, body: file });
  expect(put.status).toBe(200);
  const submitted = await call<Training>(`/v1/trainings/${training.id}/submit`, { token: account.userToken, body: {} });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(200);
  return Training.parse(submitted.body);
}

/** Polls until the training is terminal (or `until` holds), returning the last status. */
export async function pollTraining(account: Account, id: string, until: (t: Training) => boolean = (t) => t.finished_at !== null, timeoutMs = 120_000): Promise<Training> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const training = Training.parse((await call(`/v1/trainings/${id}`, { token: account.userToken })).body);
    if (until(training) || Date.now() > deadline) return training;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
