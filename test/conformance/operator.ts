/**
 * What the operator and the identity provider do for the conformance suite (runs only in tests):
 * accounts with their first key, account status, prepaid image credit, registry entries and the
 * passing of time for retention. None of it is the client's side, which stays in client.ts; all of it
 * goes through the ops functions or the stack's database, as an operator's own tools would.
 */
import { randomUUID } from "node:crypto";
import { DEMO_QUESTION, DEMO_QUESTION_ID } from "../../local/demo-images.ts";
import { stringifyJson } from "../../contract/json.ts";
import { IMAGE_BASE_ALIAS } from "../../contract/limits.ts";
import { grantCredit, setStatus, showAccount } from "../../ops/accounts.ts";
import { registerRelease } from "../../ops/releases.ts";
import { trainedFingerprint, trainedModelId, type TrainedHeads } from "../../server-shared/trained.ts";
import { createKey, newAccount, query, withDb } from "../support/api.ts";

export type Account = Awaited<ReturnType<typeof newAccount>>;

/** A new user of the identity provider with an account and its first API key (`key.id`, `key.secret`), and the user's access token. */
export const account = (): Promise<Account> => newAccount();

/** Another API key of the same account. */
export async function anotherKey(of: Account, name = "another key"): Promise<{ id: string; secret: string }> {
  const key = await createKey(of.userToken, name);
  return { id: key.id, secret: key.secret };
}

export const setAccountStatus = (of: Account, status: "active" | "disabled") => withDb((db) => setStatus(db, of.accountId, status));

export const grant = (of: Account, microUsd: number) => withDb((db) => grantCredit(db, of.accountId, { amountMicroUsd: microUsd, note: "conformance" }));

/** The account's prepaid credit as the operator's `show` gives it. */
export async function creditOf(of: Account): Promise<{ balance: number; reserved: number }> {
  const shown = await withDb((db) => showAccount(db, of.accountId));
  const credit = shown.credit as { balance_micro_usd: number; reserved_micro_usd: number };
  return { balance: credit.balance_micro_usd, reserved: credit.reserved_micro_usd };
}

/** A text release of the registry only `owner` may use (never served: no request to it gets that far). */
export async function registerPrivateModel(owner: Account): Promise<string> {
  const id = `conformance-private-${randomUUID().slice(0, 8)}`;
  await withDb((db) =>
    registerRelease(db, { id, fingerprint: "c".repeat(64), url: "https://gpu.example.test", token_env: "SVC_RUNTIME_SECRET", release_date: "2026-11-01", description: "private", owners: [owner.accountId], sidecar_url: null }),
  );
  return id;
}

/** Where the registry's runtimes listen and the names of their secret variables: never returned to a client. */
export async function runtimeAddresses(): Promise<string[]> {
  const rows = await query<{ url: string; token_env: string }>("SELECT url, token_env FROM model_releases");
  return [...new Set(rows.flatMap((r) => [r.url.replace(/\/$/, ""), r.token_env]))];
}

/** The image backbone's pooled feature width (EfficientNet-Lite0), which an image head reads. */
const BACKBONE_FEATURES = 1280;

/** The saved task of the image models registered here: one choice question, its outcome order circle, square. */
export const IMAGE_QUESTION_ID = DEMO_QUESTION_ID;
export const IMAGE_QUESTION = DEMO_QUESTION;

/**
 * An API-ready image model owned by `owner`, registered as the training worker registers an accepted
 * one (server-shared/jobs/trainings.ts accept and activate) but with a head written here: it ignores
 * the photo and always gives circle 0.58, square 0.21 and none of them 0.21. Training one through
 * the service takes half a minute on this machine, and training is outside what this suite checks.
 */
export async function registerImageModel(owner: Account): Promise<string> {
  const [base] = await query<{ id: string; fingerprint: string; url: string; token_env: string; sidecar_url: string }>(
    "SELECT id, fingerprint, url, token_env, sidecar_url FROM model_releases WHERE id = (SELECT release_id FROM model_aliases WHERE alias = $1)",
    [IMAGE_BASE_ALIAS],
  );
  if (!base) throw new Error(`no ${IMAGE_BASE_ALIAS} release in the registry`);
  const zeros = Array<number>(BACKBONE_FEATURES).fill(0);
  const heads: TrainedHeads = {
    kind: "image_head",
    features: BACKBONE_FEATURES,
    questions: [
      {
        classes: 3,
        lambda: 1,
        mean: zeros,
        scale: Array<number>(BACKBONE_FEATURES).fill(1),
        weights: [[...zeros, 1], [...zeros, 0], [...zeros, 0]],
        calibration: { temperature: 1 },
      },
    ],
  };
  const task = { questions: stringifyJson({ [IMAGE_QUESTION_ID]: IMAGE_QUESTION }) };
  const id = trainedModelId(IMAGE_BASE_ALIAS, randomUUID());
  await query(
    `INSERT INTO model_releases (id, fingerprint, owners, url, token_env, sidecar_url, release_date, description, base_release, task, head, modality)
     VALUES ($1, $2, $3, $4, $5, $6, current_date, 'conformance image model', $7, $8, $9, 'image')`,
    [id, await trainedFingerprint(base.fingerprint, task, heads), [owner.accountId], base.url, base.token_env, base.sidecar_url, base.id, JSON.stringify(task), JSON.stringify(heads)],
  );
  return id;
}

/** Moves a terminal batch's end `ms` into the past, as if that much time had gone by since. */
export async function backdateFinish(batchId: string, ms: number): Promise<void> {
  const rows = await query("UPDATE batches SET finished_at = finished_at - make_interval(secs => $2::double precision / 1000) WHERE id = $1 AND finished_at IS NOT NULL RETURNING id", [batchId, ms]);
  if (rows.length !== 1) throw new Error(`batch ${batchId} has not finished`);
}
