/**
 * Per-release calibration (an operator command; runs where the release's runtime is reachable, with
 * its secret in the variable the registry's `token_env` names, against DATABASE_URL):
 *
 *   npm run registry -- calibrate <new-release-id> --base <release-id> --data <labelled.jsonl> [--alias <alias>]
 *
 * Reads every labelled item (one JSON object per line: `{"state", "questions": {one question},
 * "label"}`, the label `true`/`false` for noul, an option name for choice, a 0-based level for
 * score) through the served readout on the base release's runtime, splits the items by a hash of
 * each line into a fitting half and an evaluation half, fits Platt scaling for noul and a temperature
 * for choice and for score on the fitting half, and measures the evaluation half before and after.
 *
 * The result is a new release: it runs on the base's runtime, its fingerprint covers the base's
 * fingerprint and the parameters (server-shared/registry.ts `calibratedFingerprint`), and it
 * carries the report that GET /v1/models/{model}/calibration publishes. With `--alias`, the alias
 * moves to it in the same transaction. The base release is kept, for reproducibility.
 *
 * `npm run bench:quality -- --labelled fit.jsonl` writes the quality benchmark's fitting part in
 * this format.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import type pg from "pg";
import { CalibrationReport, QUESTION_TYPES, type QuestionType, type TypeEvaluation } from "../contract/calibration.ts";
import { parseJson } from "../contract/json.ts";
import { calibratedFingerprint, RegistryEntry, REGISTRY_COLUMNS } from "../server-shared/registry.ts";
import { calibrated, figures, fitCalibration, LabelledItem, readLabelled, reliability, truthIndex, type ReadItem } from "../sidecar/decide/evaluation.ts";
import { SERVED_STEPS } from "../sidecar/decide/steps.ts";
import { verifiedClient } from "../sidecar/decide/identity.ts";
import { runtimeClientFor, type RuntimeClient } from "../sidecar/runtime/client.ts";
import { SecretSource } from "../server-shared/secrets.ts";
import { pointAlias } from "./releases.ts";

export interface CalibrateOptions {
  id: string;
  base: string;
  dataPath: string;
  alias: string | null;
  /** Where the runtime secret is read from (the variable the base's `token_env` names). */
  env: Record<string, string | undefined>;
  /** For tests: the runtime client to use instead of the registry's address. */
  client?: RuntimeClient;
}

/** A labelled file's lines, parsed and their labels checked before any pass runs; throws naming the first bad line. */
export function readLabelledFile(text: string): { line: string; item: LabelledItem }[] {
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  return lines.map((line, i) => {
    const parsed = LabelledItem.safeParse(parseJsonOrThrow(line, i + 1));
    if (!parsed.success) throw new Error(`line ${i + 1}: ${parsed.error.issues[0]?.message ?? "not a labelled item"}`);
    try {
      truthIndex(parsed.data);
    } catch (err) {
      throw new Error(`line ${i + 1}: ${err instanceof Error ? err.message : String(err)}`);
    }
    return { line, item: parsed.data };
  });
}

function parseJsonOrThrow(line: string, number: number): unknown {
  try {
    return parseJson(line);
  } catch (err) {
    throw new Error(`line ${number}: ${err instanceof Error ? err.message : "not JSON"}`);
  }
}

/** The half a line belongs to: the first byte of its SHA-256, even for fitting. */
export function isFitting(line: string): boolean {
  return createHash("sha256").update(line).digest()[0]! % 2 === 0;
}

export async function calibrateRelease(db: pg.ClientBase, opts: CalibrateOptions): Promise<CalibrationReport> {
  const { rows } = await db.query(`SELECT ${REGISTRY_COLUMNS} FROM model_registry WHERE id = $1 AND retired_at IS NULL`, [opts.base]);
  if (!rows[0]) throw new Error(`no serving release ${opts.base}`);
  const base = RegistryEntry.parse(rows[0]);
  if (base.calibration !== null || base.runtime_release !== base.id) throw new Error(`release ${opts.base} is itself calibrated; calibrate its base instead`);

  const text = readFileSync(opts.dataPath, "utf8");
  const lines = readLabelledFile(text);
  const release = { id: base.id, fingerprint: base.fingerprint };
  const client = opts.client ?? runtimeClientFor(base, new SecretSource(opts.env));
  // Refused (IdentityMismatchError) when the runtime at the registry's address serves another release.
  await verifiedClient(client, release).identity();

  const steps = { ...SERVED_STEPS, calibration: false };
  const read = await readLabelled(client, release, lines.map((l) => l.item), steps);
  const fitting = read.filter((_, i) => isFitting(lines[i]!.line));
  const evaluation = read.filter((_, i) => !isFitting(lines[i]!.line));
  const parameters = fitCalibration(fitting);

  const count = (items: ReadItem[]) => Object.fromEntries(QUESTION_TYPES.map((t) => [t, items.filter((r) => r.type === t).length])) as Record<QuestionType, number>;
  const evaluated: Partial<Record<QuestionType, TypeEvaluation>> = {};
  for (const type of QUESTION_TYPES) {
    const before = evaluation.filter((r) => r.type === type);
    if (before.length === 0) continue;
    const after = before.map((r) => calibrated(r, parameters));
    evaluated[type] = { before: figures(before), after: figures(after), reliability_before: reliability(before), reliability_after: reliability(after) };
  }
  const report = CalibrationReport.parse({
    release: opts.id,
    base_release: base.id,
    fitted_at: new Date().toISOString(),
    parameters,
    data: { file: basename(opts.dataPath), sha256: createHash("sha256").update(text).digest("hex"), fitting_items: count(fitting), evaluation_items: count(evaluation) },
    evaluation: evaluated,
  });

  const fingerprint = await calibratedFingerprint(base.fingerprint, parameters);
  await db.query("BEGIN");
  try {
    await db.query(
      `INSERT INTO model_releases (id, fingerprint, owners, url, token_env, release_date, description, sidecar_url, base_release, calibration, calibration_report)
       VALUES ($1, $2, $3, $4, $5, current_date, $6, $7, $8, $9, $10)`,
      [
        opts.id,
        fingerprint,
        base.owners,
        base.url,
        base.token_env,
        `${base.description} (calibrated on ${basename(opts.dataPath)})`.trim(),
        base.sidecar_url,
        base.id,
        JSON.stringify(parameters),
        JSON.stringify(report),
      ],
    );
    if (opts.alias) await pointAlias(db, opts.alias, opts.id);
    await db.query("COMMIT");
  } catch (err) {
    await db.query("ROLLBACK");
    throw err;
  }
  return report;
}
