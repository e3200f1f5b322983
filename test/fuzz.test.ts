/**
 * Schema-driven fuzzing: Schemathesis (pinned in test/fuzz/requirements.txt, installed in a venv
 * under .local/) generates requests from the served OpenAPI document, valid and invalid ones, and
 * sends them to the real stack with valid credentials for both security schemes (test/fuzz/
 * schemathesis.toml). Every check runs: no 5xx but the documented 503/504/529, and every answer
 * conforms to the document (status, content type, body schema, headers). A request that has not
 * answered within the per-request timeout fails the run, as does any finding; the test fails with
 * Schemathesis's report, which names the seed and a curl command for each failure.
 *
 * The fuzz account is its own (keys and batches it makes touch nothing else) and has no quotas, so a
 * 429 cannot hide an answer; the keys it manages belong to a second account, so revoking one never
 * takes the first account's key away mid-run.
 *
 *     SVC_FUZZ_SEED=123 npx vitest run test/fuzz.test.ts        # replay a run (the report names its seed)
 *     SVC_FUZZ_EXAMPLES=200 npx vitest run test/fuzz.test.ts    # a deeper run
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LIMITS } from "../contract/limits.ts";
import { OPENAPI_PATH } from "../contract/openapi.ts";
import { query, newAccount, stack } from "./support/api.ts";
import { pythonVenv, ROOT, runTool, type Venv } from "./support/python-venv.ts";

const FUZZ_DIR = join(ROOT, "test", "fuzz");
/**
 * Generated cases per operation and phase: enough to find what is there in well under 3 minutes on
 * two cores (about 800 requests; 40 to 90 s). SVC_FUZZ_EXAMPLES asks for a deeper run.
 */
const MAX_EXAMPLES = Number(process.env.SVC_FUZZ_EXAMPLES ?? 25);
/**
 * The longest a request may take: a decision may wait `laneWaitMs` for its lane before it answers
 * 504, so anything slower than that and a margin is a hang.
 */
const REQUEST_TIMEOUT_S = LIMITS.laneWaitMs / 1000 + 10;
/** The whole run's bound: a hang past the per-request timeout, or a run far slower than usual, fails. */
const RUN_TIMEOUT_MS = Math.max(240_000, MAX_EXAMPLES * 8_000);

/** Hypothesis failing inside CPython 3.11's ast module, not in any check of the service. */
const CPYTHON_AST_CRASH = /SystemError: AST constructor recursion depth mismatch/;

/**
 * The failures of a report that are workerd's own answer to a Host header no URL can have (the
 * fuzzer adds random headers, and once named one `HosT: lYB}`): a bare `500 Internal Server Error`
 * from workerd's HTTP parser, before any Worker code runs (no envelope, no content type). Only the
 * local stack sees these: in production Cloudflare's front end answers a request for another host
 * and never hands the Worker such a Host. Returns how many failures there are and how many are that.
 */
function localHostFailures(report: string): { failures: number; localHost: number } {
  const failures = report.split(/^\d+\. Test Case ID: /m).slice(1);
  const localHost = failures.filter(
    (failure) =>
      /^\[500\] Internal Server Error:\s+`Internal Server Error`$/m.test(failure) && /curl .*-H '[Hh][Oo][Ss][Tt]: [^']*'/.test(failure.split("Reproduce with:")[1] ?? ""),
  );
  return { failures: failures.length, localHost: localHost.length };
}

let venv: Venv;
let workDir: string;

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), "fuzz-"));
  // The newest Python on the PATH first: once, on CPython 3.11.7, Hypothesis failed inside its own
  // repr of the decision request's deeply nested strategies ("SystemError: AST constructor recursion
  // depth mismatch", a CPython bug near the recursion limit); the same seed passed on a rerun.
  venv = await pythonVenv("fuzz-venv", join(FUZZ_DIR, "requirements.txt"), { pythons: ["python3.13", "python3.12", "python3.11", "python3"] });
}, 600_000);

afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

describe("schema-driven fuzzing", () => {
  it("finds no server error and no answer that breaks the document", { timeout: RUN_TIMEOUT_MS + 60_000 }, async () => {
    const [fuzz, keys] = await Promise.all([newAccount(), newAccount()]);
    const quotas = await query<Record<string, unknown>>(
      "SELECT requests_per_second, tokens_per_second, max_active_batches, max_batch_storage_bytes FROM accounts WHERE id = $1",
      [fuzz.accountId],
    );
    expect(quotas[0], "the fuzz account must have no quota").toEqual({ requests_per_second: null, tokens_per_second: null, max_active_batches: null, max_batch_storage_bytes: null });

    const args = [
      "--config-file",
      join(FUZZ_DIR, "schemathesis.toml"),
      "run",
      `${stack().baseUrl}${OPENAPI_PATH}`,
      "--url",
      stack().baseUrl,
      "--max-examples",
      String(MAX_EXAMPLES),
      "--request-timeout",
      String(REQUEST_TIMEOUT_S),
      "--workers",
      "2",
      "--no-color",
      "--output-truncate",
      "false",
      ...(process.env.SVC_FUZZ_SEED ? ["--seed", process.env.SVC_FUZZ_SEED] : []),
    ];
    const env = {
      PATH: process.env.PATH ?? "",
      HOME: workDir,
      SVC_FUZZ_API_KEY: fuzz.key.secret,
      SVC_FUZZ_USER_TOKEN: keys.userToken,
      PYTHONDONTWRITEBYTECODE: "1",
      COLUMNS: "160",
    };
    const started = Date.now();
    let result = await runTool(venv.bin("schemathesis"), args, { cwd: workDir, env, timeoutMs: RUN_TIMEOUT_MS });
    // The fuzzer's own crash on CPython 3.11 (see beforeAll) says nothing about the service: that
    // one crash, and only it, is run again once. A finding is never retried.
    if (result.code !== 0 && CPYTHON_AST_CRASH.test(result.output)) {
      console.warn("schemathesis crashed inside CPython's ast (a CPython 3.11 bug, not a finding); running it once more");
      result = await runTool(venv.bin("schemathesis"), args, { cwd: workDir, env, timeoutMs: RUN_TIMEOUT_MS });
    }
    const report = `${result.output}\n(schemathesis exited ${result.code} after ${Math.round((Date.now() - started) / 1000)} s)`;
    // A failure is a finding unless every one is workerd's answer to a malformed Host (see localHostFailures).
    const { failures, localHost } = localHostFailures(result.output);
    if (result.code !== 0 && failures > 0 && localHost === failures) console.warn(`schemathesis: ${failures} answer(s) of workerd's own HTTP parser to a malformed Host header (local only), not findings`);
    else expect(result.code, report).toBe(0);
    // It tested every operation of the document. (Its warnings do not fail the run: the one it gives is
    // that the calibration routes found no calibrated release, which this stack does not have.)
    const selected = /Selected: (\d+)\/(\d+)\s+Tested: (\d+)/.exec(report);
    expect(selected?.slice(1), report).toEqual([selected?.[2], selected?.[2], selected?.[2]]);
    expect(report, report).toMatch(/Test cases:\s+\d+ generated, \d+ passed/);
  });
});
