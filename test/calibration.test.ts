/**
 * Per-release calibration as an operator runs it (`npm run registry -- calibrate`) on the shared
 * stack: fitted on labelled data through the real runtime, registered as a new release on the base's
 * runtime, applied by the readout, and published at GET /v1/models/{model}/calibration(.svg).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CalibrationReport } from "../contract/calibration.ts";
import { ErrorEnvelope } from "../contract/errors.ts";
import { DecisionResponse } from "../contract/decision.ts";
import { stringifyJson } from "../contract/json.ts";
import { LIMITS } from "../contract/limits.ts";
import { ModelList } from "../contract/models.ts";
import { ROOT } from "../local/tiers.ts";
import { RUNTIME_TOKEN_ENV } from "../local/stack.ts";
import { calibratedFingerprint } from "../server-shared/registry.ts";
import { applyPlatt, applyTemperature } from "../sidecar/decide/calibration.ts";
import { qualitySets } from "../bench/quality/data.ts";
import { retireRelease } from "../ops/releases.ts";
import { call, newAccount, query, stack, withDb } from "./support/api.ts";
import { lines, poll, results, submitted } from "./support/bulk.ts";
import { operatorHealthAfterChange } from "./support/health.ts";
import { apiKeyRouteSecurity, expectError } from "./support/security.ts";

function registry(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(join(ROOT, "node_modules/.bin/bun"), [join(ROOT, "ops/registry.ts"), ...args], {
    env: { ...process.env, DATABASE_URL: stack().databaseUrl, [RUNTIME_TOKEN_ENV]: stack().secrets.runtime },
    encoding: "utf8",
    timeout: 180_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const dir = mkdtempSync(join(tmpdir(), "calibration-test-"));
const id = `cal-${crypto.randomUUID().slice(0, 8)}`;
const alias = `${id}-latest`;
let report: CalibrationReport;
let account: Awaited<ReturnType<typeof newAccount>>;

const ticket = {
  state: { ticket: "I was charged twice for my March invoice." },
  questions: {
    money: { type: "noul", instructions: "Is the ticket about money?" },
    topic: { type: "choice", instructions: "What is it about?", criteria: { billing: null, bug: null, praise: null } },
    severity: { type: "score", instructions: "How severe is it?", criteria: ["none", "minor", "major"] },
  },
};

beforeAll(async () => {
  account = await newAccount();
  // The quality benchmark's fitting part at 4 items per set: noul, two-option choice and score items.
  const data = join(dir, "labelled.jsonl");
  writeFileSync(data, qualitySets(4).fitting.map((b) => stringifyJson(b.item)).join("\n") + "\n");
  const ran = registry("calibrate", id, "--base", stack().releaseId, "--data", data, "--alias", alias);
  expect(ran.status, ran.stderr).toBe(0);
  report = CalibrationReport.parse(JSON.parse(ran.stdout));
}, 200_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("npm run registry -- calibrate", () => {
  it("fits every type present, on one half of the lines, and measures the other half before and after", () => {
    expect(report.release).toBe(id);
    expect(report.base_release).toBe(stack().releaseId);
    expect(report.parameters.noul).not.toBeNull();
    expect(report.parameters.choice).not.toBeNull();
    expect(report.parameters.score).not.toBeNull();
    const { fitting_items: fit, evaluation_items: held } = report.data;
    expect(fit.noul + held.noul).toBe(16);
    expect(fit.noul).toBeGreaterThan(0);
    expect(held.noul).toBeGreaterThan(0);
    expect(report.data.file).toBe("labelled.jsonl");
    for (const type of ["noul", "choice", "score"] as const) {
      const evaluation = report.evaluation[type];
      if (!evaluation) continue;
      expect(evaluation.before.items).toBe(held[type]);
      expect(evaluation.reliability_after).toHaveLength(10);
    }
  });

  it("registers a new release on the base's runtime whose fingerprint covers the parameters, moves the alias, and keeps the base", async () => {
    const [row] = await query<{ fingerprint: string; base_release: string; sidecar_url: string }>(
      "SELECT fingerprint, base_release, sidecar_url FROM model_releases WHERE id = $1",
      [id],
    );
    const [base] = await query<{ fingerprint: string; sidecar_url: string; retired_at: Date | null }>("SELECT fingerprint, sidecar_url, retired_at FROM model_releases WHERE id = $1", [
      stack().releaseId,
    ]);
    expect(row!.base_release).toBe(stack().releaseId);
    expect(row!.fingerprint).toBe(await calibratedFingerprint(base!.fingerprint, report.parameters));
    expect(row!.sidecar_url).toBe(base!.sidecar_url);
    expect(base!.retired_at).toBeNull();
    expect(await query("SELECT release_id FROM model_aliases WHERE alias = $1", [alias])).toEqual([{ release_id: id }]);
    // A release is immutable: its calibration cannot be edited after the fact.
    await expect(query("UPDATE model_releases SET calibration = '{}' WHERE id = $1", [id])).rejects.toThrow(/immutable/);
  });

  it("answers through the alias with the calibrated release, whose readout applies the parameters to the base's", async () => {
    const decide = async (model: string) => {
      const reply = await call("/v1/systemone", { token: account.key.secret, body: { model, ...ticket } });
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      return DecisionResponse.parse(reply.body);
    };
    const base = await decide(stack().releaseId);
    const cal = await decide(alias);
    expect(cal.model).toBe(id);
    // The same passes' logical input; the calibrated release shares its base's runtime, so it finds
    // the content-free readings (and the state) the base's request left kept, and evaluates less.
    expect(cal.usage.billable_input_tokens).toBe(base.usage.billable_input_tokens);
    expect(cal.usage.input_tokens).toBeLessThanOrEqual(base.usage.input_tokens);
    const [b, c] = [Object.fromEntries(base.answers), Object.fromEntries(cal.answers)];
    if (b.money?.type !== "noul" || c.money?.type !== "noul" || b.topic?.type !== "choice" || c.topic?.type !== "choice") throw new Error("wrong answer types");
    expect(c.money.noul).toBeCloseTo(applyPlatt(b.money.noul, report.parameters.noul!), 12);
    expect([...c.topic.probabilities.values()].map((p) => p.toFixed(10))).toEqual(
      applyTemperature([...b.topic.probabilities.values()], report.parameters.choice!.temperature).map((p) => p.toFixed(10)),
    );
    expect(c.money.option_mass).toBe(b.money.option_mass);
  });

  /**
   * A calibrated release's row copied by hand with other parameters (its fingerprint no longer covers
   * them), served while `use` runs and retired after: the sidecar's health report names such a row as
   * a broken link, which would turn the shared stack's /health to 503 for the tests that follow.
   */
  async function withForgedCalibratedRow(forged: string, use: () => Promise<void>): Promise<void> {
    await query(
      `INSERT INTO model_releases (id, fingerprint, owners, url, token_env, release_date, description, sidecar_url, base_release, calibration)
       SELECT $1, fingerprint, owners, url, token_env, release_date, '', sidecar_url, base_release, '{"noul":{"slope":-1,"bias":0},"choice":null,"score":null}'
         FROM model_releases WHERE id = $2`,
      [forged, id],
    );
    try {
      await use();
    } finally {
      await withDb((db) => retireRelease(db, forged));
    }
  }

  it("refuses a calibrated release whose fingerprint does not cover its parameters", async () => {
    const forged = `${id}-forged`;
    await withForgedCalibratedRow(forged, async () => {
      const reply = await call("/v1/systemone", { token: account.key.secret, body: { model: forged, ...ticket } });
      expectError(reply, 503, "identity_mismatch");
      const health = await operatorHealthAfterChange();
      expect(JSON.stringify(health.body)).toContain(`sidecar->runtime ${forged}`);
      expect(JSON.stringify(health.body)).toMatch(/identity mismatch/);
    });
  });

  it("refuses the same hand-edited row in bulk: the record's error is identity_mismatch, with no answer and no usage", { timeout: 120_000 }, async () => {
    const forged = `${id}-forged-bulk`;
    let batchId = "";
    await withForgedCalibratedRow(forged, async () => {
      batchId = await submitted(account, lines([{ custom_id: "forged", body: { model: forged, ...ticket } }, { custom_id: "real", body: { model: id, ...ticket } }]));
      await poll(account, batchId, undefined, 100_000);
    });
    const done = await poll(account, batchId);
    expect(done).toMatchObject({ status: "completed", request_counts: { total: 2, completed: 1, failed: 1 } });
    const [forgedRecord, realRecord] = await results(account, batchId);
    expect(forgedRecord).toMatchObject({ custom_id: "forged", error: { status: 503, code: "identity_mismatch" } });
    // Retried as any 503 is (an operator may fix the row meanwhile), each attempt after a wait: the
    // record's own, set with its count (the last attempt's is not stored).
    const [record] = await query<{ attempts: number; not_before: Date | null }>("SELECT attempts, not_before FROM batch_records WHERE batch_id = $1 AND line = 1", [batchId]);
    expect(record!.attempts).toBe(LIMITS.bulkTransientAttempts - 1);
    expect(record!.not_before).not.toBeNull();
    expect(realRecord).toMatchObject({ custom_id: "real", response: { model: id } });
    expect(await query("SELECT 1 FROM usage_records WHERE request_id = $1", [`batch_${batchId}_1`])).toEqual([]);
  });

  it("refuses a labelled file with a bad line, naming the line, and registers nothing", async () => {
    const data = join(dir, "bad.jsonl");
    writeFileSync(data, `${stringifyJson(qualitySets(4).fitting[0]!.item)}\n{"state":"x","questions":{"q":{"type":"noul"}},"label":"maybe"}\n`);
    const ran = registry("calibrate", `${id}-bad`, "--base", stack().releaseId, "--data", data);
    expect(ran.status).toBe(2);
    expect(ran.stderr).toMatch(/^line 2: a noul question's label must be true or false/m);
    expect(await query("SELECT id FROM model_releases WHERE id = $1", [`${id}-bad`])).toEqual([]);
  });
});

describe("GET /v1/models/{model}/calibration", () => {
  it("serves the report and its reliability diagram for the alias and the release id, and lists the link", async () => {
    for (const name of [alias, id]) {
      const reply = await call(`/v1/models/${name}/calibration`, { token: account.key.secret });
      expect(reply.status).toBe(200);
      expect(CalibrationReport.parse(reply.body)).toEqual(report);
    }
    const res = await fetch(`${stack().baseUrl}/v1/models/${alias}/calibration.svg`, { headers: { authorization: `Bearer ${account.key.secret}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/svg+xml; charset=utf-8");
    expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    const svg = await res.text();
    expect(svg.startsWith("<svg ")).toBe(true);
    expect(svg).toContain("noul, after");
    expect(svg).not.toContain("<script");

    const listed = ModelList.parse((await call("/v1/models", { token: account.key.secret })).body).models;
    expect(listed.find((m) => m.name === id)?.calibration).toBe(`/v1/models/${id}/calibration`);
    expect(listed.find((m) => m.name === stack().releaseId)?.calibration).toBeNull();
  });

  it("answers 404 for an uncalibrated release and for a model the account may not use", async () => {
    expectError(await call(`/v1/models/${stack().releaseId}/calibration`, { token: account.key.secret }), 404, "not_found");
    expectError(await call("/v1/models/no-such-model/calibration.svg", { token: account.key.secret }), 404, "model_not_found");
  });

  it("answers any model name, however odd, with the report or a 404 envelope, never a crash", async () => {
    const name = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.string({ unit: "grapheme", maxLength: 40 }),
      fc.constantFrom("__proto__", "constructor", "..", "%00", "svc-shared%2Fcalibration", "a".repeat(5000)),
    );
    await fc.assert(
      fc.asyncProperty(name, fc.boolean(), async (model, svg) => {
        const reply = await call(`/v1/models/${encodeURIComponent(model)}/calibration${svg ? ".svg" : ""}`, { token: account.key.secret });
        if (reply.status === 200) return;
        expect([404, 414]).toContain(reply.status);
        // An empty name leaves no route to match (not_found); any other is an unknown model, or the uncalibrated base.
        if (reply.status === 404) expect(["model_not_found", "not_found"]).toContain(ErrorEnvelope.parse(reply.body).error.code);
        expect(reply.requestId).toMatch(/^req_/);
      }),
      { numRuns: 40 },
    );
  });

  apiKeyRouteSecurity(() => ({ method: "GET", path: `/v1/models/${alias}/calibration` }));
});
