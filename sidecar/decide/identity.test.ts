import { describe, expect, it } from "vitest";
import { calibratedFingerprint, type RegistryEntry } from "../../server-shared/registry.ts";
import type { RuntimeClient } from "../runtime/client.ts";
import { trainedFingerprint } from "../../server-shared/trained.ts";
import { IdentityMismatchError, verifiedClient, verifiedRelease } from "./identity.ts";

const BASE = "a".repeat(64);
const PARAMETERS = { noul: { slope: 1.5, bias: -0.2 }, choice: { temperature: 1.3 }, score: null };

function entry(overrides: Partial<RegistryEntry>): RegistryEntry {
  return {
    id: "base-1",
    fingerprint: BASE,
    aliases: [],
    owners: null,
    url: "http://127.0.0.1:9",
    token_env: "RUNTIME_SECRET",
    release_date: "2026-11-25",
    description: "",
    retired_at: null,
    sidecar_url: "http://127.0.0.1:8",
    runtime_release: "base-1",
    runtime_fingerprint: BASE,
    calibration: null,
    has_calibration_report: false,
    revision: 1,
    task: null,
    head: null,
    training_id: null,
    modality: "text",
    ...overrides,
  };
}

describe("verifiedRelease: the one release check of real-time and bulk", () => {
  it("builds an uncalibrated release that runs on itself", async () => {
    const release = await verifiedRelease(entry({}), { id: "base-1", fingerprint: BASE });
    expect(release).toEqual({ id: "base-1", fingerprint: BASE, runtime: { id: "base-1", fingerprint: BASE } });
  });

  it("builds a calibrated release that runs on its base's runtime with its parameters", async () => {
    const fingerprint = await calibratedFingerprint(BASE, PARAMETERS);
    const row = entry({ id: "cal-1", fingerprint, calibration: PARAMETERS });
    expect(await verifiedRelease(row, { id: "cal-1", fingerprint })).toEqual({
      id: "cal-1",
      fingerprint,
      runtime: { id: "base-1", fingerprint: BASE },
      calibration: PARAMETERS,
    });
  });

  it("refuses a calibrated row whose parameters were edited by hand (its fingerprint no longer covers them)", async () => {
    const fingerprint = await calibratedFingerprint(BASE, PARAMETERS);
    const edited = entry({ id: "cal-1", fingerprint, calibration: { ...PARAMETERS, noul: { slope: -1, bias: 0 } } });
    const refused = await verifiedRelease(edited, { id: "cal-1", fingerprint }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(IdentityMismatchError);
    expect((refused as IdentityMismatchError).status).toBe(503);
    expect((refused as IdentityMismatchError).code).toBe("identity_mismatch");
  });

  it("builds a trained release that runs on its base's runtime with its task and heads, and refuses one edited by hand", async () => {
    const task = { questions: '{"q":{"type":"noul"}}' };
    const heads = { kind: "hidden_state_head" as const, features: 2, questions: [{ classes: 2, lambda: 0.1, mean: [0, 0], scale: [1, 1], weights: [[1, -1, 0]], calibration: { slope: 1, bias: 0 } }] };
    const fingerprint = await trainedFingerprint(BASE, task, heads);
    const row = entry({ id: "ft:1", fingerprint, task, head: heads, training_id: crypto.randomUUID() });
    expect(await verifiedRelease(row, { id: "ft:1", fingerprint })).toEqual({ id: "ft:1", fingerprint, runtime: { id: "base-1", fingerprint: BASE }, trained: { task, heads } });

    const edits = [
      { head: { ...heads, questions: [{ ...heads.questions[0]!, weights: [[1, -1, 0.5]] }] } },
      { task: { questions: '{"q":{"type":"noul","instructions":"other"}}' } },
      { head: null },
      { calibration: PARAMETERS },
    ];
    for (const edit of edits) {
      await expect(verifiedRelease(entry({ ...row, ...edit }), { id: "ft:1", fingerprint }), JSON.stringify(edit)).rejects.toBeInstanceOf(IdentityMismatchError);
    }
  });

  it("refuses a row that is not the release the caller resolved or froze (another fingerprint or id)", async () => {
    await expect(verifiedRelease(entry({}), { id: "base-1", fingerprint: "b".repeat(64) })).rejects.toBeInstanceOf(IdentityMismatchError);
    await expect(verifiedRelease(entry({}), { id: "base-2", fingerprint: BASE })).rejects.toBeInstanceOf(IdentityMismatchError);
  });
});

describe("verifiedClient: every runtime response's stamp", () => {
  const stamp = (release_id: string, fingerprint: string) => ({ release_id, fingerprint });
  /** A runtime that reports `reported` on every call: the swapped runtime a real one cannot be made to be on demand. */
  const fakeRuntimeReporting = (reported: { release_id: string; fingerprint: string }): RuntimeClient => ({
    identity: async () => ({ ...reported, rendering_version: "v", modalities: ["text"], max_tokens_per_pass: 4096, engine: "e" }),
    tokenize: async () => ({ ...reported, max_tokens_per_pass: 4096, results: [] }),
    score: async () => ({ ...reported, prompt_tokens: 1, logprobs: [] }),
    scoreGroup: async () => ({ ...reported, results: [{ prompt_tokens: 1, logprobs: [] }] }),
    embed: async () => ({ ...reported, encoder: "e".repeat(64), tokens: 2, embedding: [1] }),
  });

  it("passes responses of the expected runtime through unchanged", async () => {
    const client = verifiedClient(fakeRuntimeReporting(stamp("base-1", BASE)), { id: "base-1", fingerprint: BASE });
    expect((await client.identity()).release_id).toBe("base-1");
    expect((await client.tokenize({ texts: [] })).results).toEqual([]);
    expect((await client.score({ segments: [], label_tokens: [] })).prompt_tokens).toBe(1);
    expect((await client.scoreGroup({ passes: [] })).results).toHaveLength(1);
    expect((await client.embed({ text: "" })).embedding).toEqual([1]);
  });

  it("refuses every kind of response that names another release or fingerprint", async () => {
    for (const reported of [stamp("base-2", BASE), stamp("base-1", "c".repeat(64))]) {
      const client = verifiedClient(fakeRuntimeReporting(reported), { id: "base-1", fingerprint: BASE });
      await expect(client.identity()).rejects.toBeInstanceOf(IdentityMismatchError);
      await expect(client.tokenize({ texts: [] })).rejects.toBeInstanceOf(IdentityMismatchError);
      await expect(client.score({ segments: [], label_tokens: [] })).rejects.toBeInstanceOf(IdentityMismatchError);
      await expect(client.scoreGroup({ passes: [] })).rejects.toBeInstanceOf(IdentityMismatchError);
      await expect(client.embed({ text: "" })).rejects.toBeInstanceOf(IdentityMismatchError);
    }
  });
});
