/**
 * GET /v1/models with an API key (runs in workerd): the serving releases the account may use (shared
 * ones and those it owns), each with its aliases and, for a calibrated release, the address of its
 * calibration report. Addresses and secret names never leave the server.
 *
 * GET /v1/models/{model}/calibration and /calibration.svg: a calibrated release's published report
 * (contract/calibration.ts) and its reliability diagram, for a model name (alias or release id) the
 * account may use. A release without calibration answers 404 `not_found`.
 *
 * GET /v1/models/{model}/evaluation and /evaluation.svg: a trained model's evaluation report (the one
 * its training published, contract/trainings.ts) for its owner account; 404 `model_not_found` for any
 * other name.
 */
import { Hono } from "hono";
import { z } from "zod";
import { CalibrationReport, QUESTION_TYPES } from "../../contract/calibration.ts";
import type { ModelList } from "../../contract/models.ts";
import { reportOnTheWire, type EvaluationReport } from "../../contract/trainings.ts";
import { httpDb } from "../../server-shared/db.ts";
import { TrainingStore } from "../../server-shared/jobs/trainings.ts";
import { PARAMETERS } from "../../contract/routes.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { reliabilitySvg, SVG_HEADERS } from "../../server-shared/quality.ts";
import { apiKeyAuth } from "../auth/api-key.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { resolveModel } from "../models.ts";
import { pathParam } from "../params.ts";
import { services } from "../services.ts";
import { reportSvg } from "./trainings.ts";

export const models = new Hono<AppEnv>();

/** A release as the listing reads it from `model_registry`. */
const ModelRow = z.object({
  id: z.string(),
  aliases: z.array(z.string()),
  description: z.string(),
  release_date: z.string(),
  has_calibration_report: z.boolean(),
  trained: z.boolean(),
});

/** Where a release's calibration report is served. */
export const calibrationPath = (release: string) => `/v1/models/${encodeURIComponent(release)}/calibration`;
/** Where a trained model's evaluation report is served. */
export const evaluationPath = (release: string) => `/v1/models/${encodeURIComponent(release)}/evaluation`;

models.get("/v1/models", apiKeyAuth, quota(), async (c) => {
  const rows = await services(c.env).sql`
    SELECT id, aliases, description, release_date::text AS release_date, has_calibration_report, training_id IS NOT NULL AS trained
      FROM model_registry
     WHERE retired_at IS NULL AND (training_id IS NULL OR sidecar_url IS NOT NULL) AND (owners IS NULL OR ${c.get("account").id}::uuid = ANY (owners))
     ORDER BY release_date DESC, id`;
  const body: ModelList = {
    models: rows.map((raw) => {
      const row = ModelRow.parse(raw);
      return {
        name: row.id,
        aliases: row.aliases,
        description: row.description,
        release_date: row.release_date,
        calibration: row.has_calibration_report ? calibrationPath(row.id) : null,
        evaluation: row.trained ? evaluationPath(row.id) : null,
      };
    }),
  };
  return c.json(body);
});

/** The calibration report of the release a model name resolves to for the account; 404 when there is none. */
async function report(env: AppEnv["Bindings"], name: string | null, accountId: string): Promise<CalibrationReport> {
  const { sql } = services(env);
  const resolved = name === null ? null : await resolveModel(sql, name, accountId);
  if (!resolved) throw new ServiceError("model_not_found", "no model of that name is available to this account");
  const [row] = await sql`SELECT calibration_report FROM model_releases WHERE id = ${resolved.release.id}`;
  if (!row || row.calibration_report === null) throw new ServiceError("not_found", "this release is not calibrated; it has no calibration report");
  return CalibrationReport.parse(row.calibration_report);
}

models.get("/v1/models/:model/calibration", apiKeyAuth, quota(), async (c) => {
  return c.json(await report(c.env, pathParam(c, PARAMETERS.modelName), c.get("account").id));
});

models.get("/v1/models/:model/calibration.svg", apiKeyAuth, quota(), async (c) => {
  const found = await report(c.env, pathParam(c, PARAMETERS.modelName), c.get("account").id);
  const series = QUESTION_TYPES.flatMap((type) => {
    const evaluation = found.evaluation[type];
    if (!evaluation) return [];
    return [
      { name: `${type}, before`, bins: evaluation.reliability_before },
      { name: `${type}, after`, bins: evaluation.reliability_after },
    ];
  });
  const svg = reliabilitySvg(`Reliability of ${found.release} (held-out items)`, series);
  return c.body(svg, 200, SVG_HEADERS);
});

/** The evaluation report of the account's trained model `name` (its release id); 404 for any other name. */
async function evaluation(env: AppEnv["Bindings"], name: string | null, accountId: string): Promise<EvaluationReport> {
  const found = name === null ? null : await new TrainingStore(httpDb(services(env).sql)).reportOfModel(name, accountId);
  if (!found) throw new ServiceError("model_not_found", "no trained model of that name is available to this account");
  return found;
}

models.get("/v1/models/:model/evaluation", apiKeyAuth, quota(), async (c) => {
  return c.json(reportOnTheWire(await evaluation(c.env, pathParam(c, PARAMETERS.modelName), c.get("account").id)));
});

models.get("/v1/models/:model/evaluation.svg", apiKeyAuth, quota(), async (c) => {
  const found = await evaluation(c.env, pathParam(c, PARAMETERS.modelName), c.get("account").id);
  return c.body(reportSvg(found), 200, SVG_HEADERS);
});
