/**
 * Training helpers for tests on the shared stack: labelled files whose hash split is known, a
 * training created, uploaded and submitted through the real edge with a user token, and its status
 * polled.
 */
import { randomBytes } from "node:crypto";
import { expect } from "vitest";
import { LIMITS } from "../../contract/limits.ts";
import { Training } from "../../contract/trainings.ts";
import { isHeldOut } from "../../server-shared/trained.ts";
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

/**
 * custom_ids for `count` examples, with `heldOut` of them in the held-out part of the hash split
 * (server-shared/trained.ts isHeldOut) and the rest in the training part, in that order.
 */
export async function splitIds(prefix: string, training: number, heldOut: number): Promise<{ training: string[]; heldOut: string[] }> {
  const ids = { training: [] as string[], heldOut: [] as string[] };
  for (let i = 0; ids.training.length < training || ids.heldOut.length < heldOut; i++) {
    const id = `${prefix}-${i}`;
    const part = (await isHeldOut(id, LIMITS.trainingHeldOutPercent)) ? ids.heldOut : ids.training;
    if (part.length < (part === ids.heldOut ? heldOut : training)) part.push(id);
  }
  return ids;
}

/**
 * A yes/no training file over `sentences`, a quarter of each class held out by its custom_id, each
 * labelled by `label` (by default: is it an animal).
 */
export async function noulFile(
  question: Record<string, unknown>,
  sentences: LabelledSentence[],
  label: (s: LabelledSentence, heldOut: boolean) => boolean = (s) => s.animal,
): Promise<string> {
  const lines: string[] = [];
  for (const animal of [true, false]) {
    const mine = sentences.filter((s) => s.animal === animal);
    const held = Math.max(LIMITS.trainingHeldOutPerOutcome, Math.round(mine.length / 4));
    // Fixed ids: the same examples are held out on every run, so a job's outcome is the same too.
    const ids = await splitIds(animal ? "animal" : "vehicle", mine.length - held, held);
    const all = [...ids.training, ...ids.heldOut];
    mine.forEach((s, i) => {
      const heldOut = i >= ids.training.length;
      lines.push(JSON.stringify({ custom_id: all[i], body: { state: s.text, questions: { q: question } }, labels: { q: label(s, heldOut) } }));
    });
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

/** Creates, uploads and submits a training; returns its status after submit. */
export async function submitTraining(account: Account, file: string, model?: string): Promise<Training> {
  const created = await call<Training>("/v1/trainings", { token: account.userToken, body: { idempotency_key: `t-${randomBytes(6).toString("hex")}`, ...(model ? { model } : {}) } });
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
