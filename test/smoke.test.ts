/**
 * The deployment smoke test (ops/smoke.ts) as an operator runs it: Bun as a real process against the
 * shared stack, with a real user token. Afterwards the key it made is looked up with the same token,
 * and its output is searched for the token and for anything shaped like an API key.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { API_KEY_PATTERN, KeyList } from "../contract/keys.ts";
import { ROOT } from "../local/tiers.ts";
import { call, signIn, stack } from "./support/api.ts";

interface Outcome {
  status: number | null;
  stdout: string;
  stderr: string;
}

const BUN = join(ROOT, "node_modules/.bin/bun");
const SMOKE = join(ROOT, "ops/smoke.ts");

/** The runner's environment without its SVC_* variables, plus `env`. */
const withEnv = (env: Record<string, string>) => ({ ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("SVC_"))), ...env });

/** Runs `bun ops/smoke.ts ...args` to its end. */
/**
 * Runs the smoke command to its end. Asynchronously: a test that blocked its event loop for the run
 * would reuse a pooled connection to the edge that the edge closed meanwhile ("other side closed").
 */
function smoke(args: string[], env: Record<string, string> = {}, input?: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(BUN, [SMOKE, ...args], { cwd: ROOT, env: withEnv(env), timeout: 110_000 });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(input);
  });
}

const explain = (outcome: Outcome) => `exit ${outcome.status}\nstdout: ${outcome.stdout}\nstderr: ${outcome.stderr}`;
const ANY_API_KEY = new RegExp(API_KEY_PATTERN.source.replace(/^\^|\$$/g, ""));
/** The step lines, by name: "ok" or "FAIL". */
const steps = (stdout: string) => Object.fromEntries([...stdout.matchAll(/^(ok|FAIL) +(\S+) +\d+ ms/gm)].map((m) => [m[2], m[1]]));

describe("npm run smoke", () => {
  it("passes every step on a healthy stack, prints no secret, and leaves its key revoked", async () => {
    const { token } = await signIn();
    // The operator's read-only secret shows every link (and is printed nowhere either).
    const outcome = await smoke(["--base-url", `${stack().baseUrl}/`], { SVC_USER_TOKEN: token, METRICS_SECRET: stack().secrets.metrics });
    expect(outcome.status, explain(outcome)).toBe(0);
    expect(steps(outcome.stdout)).toEqual({ health: "ok", key: "ok", decision: "ok", batch: "ok", revoke: "ok" });
    expect(outcome.stdout).toMatch(/^ok +health .*edge->postgres.*edge->redis/m);
    expect(`${outcome.stdout}${outcome.stderr}`).not.toContain(stack().secrets.metrics);
    expect(outcome.stdout).toMatch(/^ +batch completed 3\/3$/m);

    const list = KeyList.parse((await call("/v1/keys", { token })).body);
    expect(list.keys).toHaveLength(1);
    const key = list.keys[0]!;
    expect(key).toMatchObject({ name: expect.stringMatching(/^smoke \d{4}-\d\d-\d\dT/), status: "revoked" });
    expect(outcome.stdout).toContain(`"${key.name}" revoked and refused (401)`);
    for (const output of [outcome.stdout, outcome.stderr]) {
      expect(output).not.toContain(token);
      expect(output).not.toMatch(ANY_API_KEY);
      // The key's id is the first part of its secret.
      expect(output).not.toContain(key.id);
    }
  }, 120_000);

  it("still revokes its key when a step after the key fails, and says so", async () => {
    const { token } = await signIn();
    const outcome = await smoke(["--base-url", stack().baseUrl, "--model", "no-such-model"], { SVC_USER_TOKEN: token });
    expect(outcome.status, explain(outcome)).toBe(1);
    expect(steps(outcome.stdout)).toEqual({ health: "ok", key: "ok", decision: "FAIL", revoke: "ok" });
    expect(outcome.stdout).toMatch(/^FAIL decision .*404 model_not_found/m);
    expect(outcome.stdout).toMatch(/revoking the smoke key after the failed decision step/);
    expect(outcome.stderr).toMatch(/failed at decision; the smoke key was revoked/);
    const list = KeyList.parse((await call("/v1/keys", { token })).body);
    expect(list.keys.map((key) => key.status)).toEqual(["revoked"]);
  }, 120_000);

  it("fails the batch step at its deadline, and still revokes its key", async () => {
    const { token } = await signIn();
    // A millisecond: over before the three records can have been answered.
    const outcome = await smoke(["--base-url", stack().baseUrl, "--timeout", "0.001"], { SVC_USER_TOKEN: token });
    expect(outcome.status, explain(outcome)).toBe(1);
    expect(steps(outcome.stdout)).toEqual({ health: "ok", key: "ok", decision: "ok", batch: "FAIL", revoke: "ok" });
    expect(outcome.stdout).toMatch(/^FAIL batch .*not finished within 0\.001 s/m);
    expect(outcome.stderr).toMatch(/failed at batch; the smoke key was revoked/);
    expect(KeyList.parse((await call("/v1/keys", { token })).body).keys.map((key) => key.status)).toEqual(["revoked"]);
  }, 120_000);

  it("on Ctrl-C during the batch step, stops and still revokes its key", async () => {
    const { token } = await signIn();
    const child = spawn(BUN, [SMOKE, "--base-url", stack().baseUrl], { cwd: ROOT, env: withEnv({ SVC_USER_TOKEN: token }) });
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    // Until the decision has passed (or the run ended early, which the assertions below report).
    await new Promise<void>((resolve) => {
      child.on("close", () => resolve());
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        if (/^ok +decision/m.test(stdout)) resolve();
      });
    });
    child.kill("SIGINT");
    const status = await exited;
    expect(status, `${stdout}\n${stderr}`).toBe(1);
    expect(steps(stdout)).toEqual({ health: "ok", key: "ok", decision: "ok", batch: "FAIL", revoke: "ok" });
    expect(stdout).toMatch(/^FAIL batch .*interrupted/m);
    expect(KeyList.parse((await call("/v1/keys", { token })).body).keys.map((key) => key.status)).toEqual(["revoked"]);
  }, 120_000);

  it("reads the token from stdin, and stops at the key step when the service refuses the token", async () => {
    const badToken = `not-a-token-${crypto.randomUUID()}`;
    const outcome = await smoke(["--base-url", stack().baseUrl, "--user-token-file", "-"], {}, `${badToken}\n`);
    expect(outcome.status, explain(outcome)).toBe(1);
    expect(steps(outcome.stdout)).toEqual({ health: "ok", key: "FAIL" });
    expect(outcome.stdout).toMatch(/^FAIL key .*answered 401/m);
    expect(outcome.stderr).toMatch(/failed at key; no later step was attempted/);
    expect(outcome.stdout + outcome.stderr).not.toContain(badToken);
  }, 120_000);

  it("exits 2 on bad usage", async () => {
    const token = { SVC_USER_TOKEN: "some-token" };
    const cases: Array<[string[], Record<string, string>, RegExp]> = [
      [[], token, /--base-url is required/],
      [["--base-url", "http://example.com"], token, /plaintext http:\/\/ to a remote host/],
      [["--base-url", "not a url"], token, /not a valid URL/],
      [["--base-url", stack().baseUrl], {}, /no user token/],
      [["--base-url", stack().baseUrl, "--timeout", "soon"], token, /--timeout is a positive number/],
      [["--base-url", stack().baseUrl, "--user-token-file", join(ROOT, "no-such-file")], {}, /cannot read --user-token-file: ENOENT/],
    ];
    for (const [args, env, message] of cases) {
      const outcome = await smoke(args, env);
      expect(outcome.status, explain(outcome)).toBe(2);
      expect(outcome.stderr).toMatch(message);
      expect(outcome.stdout).toBe("");
    }
  });

  it("refuses a token given as an argument without repeating it, and prints its usage on --help", async () => {
    const refused = await smoke(["--base-url", stack().baseUrl, "--user-token=typed-secret"]);
    expect(refused.status, explain(refused)).toBe(2);
    expect(refused.stderr).toMatch(/cannot read option --user-token/);
    expect(refused.stderr).not.toContain("typed-secret");
    const help = await smoke(["--help"]);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: npm run smoke -- --base-url URL/);
  });
});
