/**
 * `npm start`'s launcher (local/start.ts under Bun) as a user runs it, with the image flags on: it
 * comes up and prints where everything listens, `npm run images:demo` trains the demonstration image
 * model and answers an image decision with it, a second start says plainly that one is running, and
 * Ctrl-C stops every process it started. Then what a user made (a key, a finished batch, a trained
 * text model, the image model, credit) is used again after a start over the same data, after Ctrl-C
 * and after the launcher was killed with SIGKILL (its children left running).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Batch, ResultsPage } from "../contract/batches.ts";
import { CreditBalance } from "../contract/credit.ts";
import { CreatedKey } from "../contract/keys.ts";
import { Training } from "../contract/trainings.ts";
import { DEMO_QUESTION, DEMO_QUESTION_ID, demoImage } from "../local/demo-images.ts";
import { uploadImage } from "../local/image-api.ts";
import { freePortPair } from "../local/ports.ts";
import { stopLeftovers } from "../local/process.ts";
import { ROOT } from "../local/tiers.ts";
import { getUserAccessToken } from "../local/user-token.ts";
import { animalSentences, noulFile } from "./support/training.ts";

const BUN = join(ROOT, "node_modules/.bin/bun");
let dataDir: string;
let env: NodeJS.ProcessEnv;
let launcher: ChildProcess;
let output = "";

/** Every live descendant of `pid`, from /proc. */
function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] !== "Z") parents.set(Number(entry), Number(fields[1]));
    } catch {
      /* the process ended while we looked */
    }
  }
  const found: number[] = [];
  const walk = (parent: number) => {
    for (const [child, ppid] of parents) {
      if (ppid !== parent) continue;
      found.push(child);
      walk(child);
    }
  };
  walk(pid);
  return found;
}

function alive(pid: number): boolean {
  try {
    return !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch {
    return false;
  }
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "svc-start-"));
  chmodSync(dataDir, 0o711);
  // npm start listens on PORT and PORT+1: both must be free (an outgoing connection may hold PORT+1).
  const port = await freePortPair();
  env = { ...process.env, SVC_STACK_DIR: dataDir, PORT: String(port), IMAGE_API: "on", IMAGE_BROWSER: "on" };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  await launch();
});

afterAll(async () => {
  if (launcher.exitCode === null) launcher.kill("SIGKILL");
  // Whatever a failed test left running (the launcher's children have process groups of their own).
  await stopLeftovers(dataDir);
  rmSync(dataDir, { recursive: true, force: true });
});

/** Runs `npm start`'s launcher over `dataDir` until it says it is up (or exits). */
async function launch(): Promise<void> {
  output = "";
  launcher = spawn(BUN, [join(ROOT, "local/start.ts")], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  launcher.stdout?.on("data", (chunk) => (output += chunk));
  launcher.stderr?.on("data", (chunk) => (output += chunk));
  const deadline = Date.now() + 120_000;
  while (!output.includes("Press Ctrl-C") && launcher.exitCode === null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Ctrl-C, as a user stops it; resolves with the launcher's exit code. */
async function interrupt(): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => launcher.once("exit", (code) => resolve(code)));
  launcher.kill("SIGINT");
  return exited;
}

const base = () => `http://127.0.0.1:${env.PORT}`;

/** A JSON call to the running stack. */
async function api<T>(path: string, token: string, body?: unknown): Promise<{ status: number; json: T }> {
  const res = await fetch(`${base()}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as T };
}

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value).slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

const ANIMAL_QUESTION = { type: "noul", instructions: "Is this sentence about an animal?" };

/** What the first run made, used again after each restart. */
const made = { userToken: "", key: "", batchId: "", results: "", textModel: "", imageModel: "", credit: 0 };

/** Everything the first run made still works: the key, the batch's results, both trained models, the credit; /health is 200. */
async function everythingStillWorks(): Promise<void> {
  // The operator's view names a link that is down and why (its secret is in the edge's settings file).
  const metricsSecret = /^METRICS_SECRET=(.*)$/m.exec(readFileSync(join(dataDir, "edge.env"), "utf8"))![1]!;
  const health = await fetch(`${base()}/health`, { headers: { authorization: `Bearer ${metricsSecret}` } });
  expect(health.status, await health.text()).toBe(200);
  const results = await fetch(`${base()}/v1/batches/${made.batchId}/results`, { headers: { authorization: `Bearer ${made.key}` } });
  expect(results.status).toBe(200);
  expect(await results.text()).toBe(made.results);
  const text = await api<{ answers: Record<string, { noul: number }> }>("/v1/systemone", made.key, { model: made.textModel, state: "A donkey in the field.", questions: { q: ANIMAL_QUESTION } });
  expect(text.status, JSON.stringify(text.json)).toBe(200);
  expect(text.json.answers.q!.noul).toBeGreaterThan(0.5);
  const assetId = await uploadImage(base(), made.userToken, await demoImage("circle", 20_000), "prediction", "circle.png");
  const image = await api<{ answers: Record<string, { choice: string }> }>("/v1/image-decisions", made.userToken, { model: made.imageModel, state: "", images: [{ asset_id: assetId }], questions: { [DEMO_QUESTION_ID]: DEMO_QUESTION } });
  expect(image.status, JSON.stringify(image.json)).toBe(200);
  expect(image.json.answers[DEMO_QUESTION_ID]!.choice).toBe("circle");
  // Spent by the decision just made, nothing lost to the restart.
  const credit = CreditBalance.parse((await api("/v1/image-credit", made.key)).json).balance_micro_usd;
  expect(credit).toBeLessThan(made.credit);
  expect(credit).toBeGreaterThan(0);
  made.credit = credit;
}

describe("npm start", () => {
  it("prints the base URL, where each piece listens, and how to get a first key", async () => {
    expect(output).toContain("Decision service is up");
    const base = /Base URL: (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1];
    expect(base).toBe(`http://127.0.0.1:${env.PORT}`);
    for (const piece of ["edge (workerd via Miniflare)", "sidecar (bun)", "runtime local-", "image runtime local-efficientnet-lite0-256-", "identity provider", "postgres (embedded)", "redis (private)", "neon bridge", "upstash bridge", "r2 (local)"]) {
      expect(output).toContain(piece);
    }
    expect(output).toContain("npm run -s user-token");
    expect(output).not.toMatch(/postgres:\/\/postgres:(?!\*\*\*)/);
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    // The web console, at the address printed, signing in with the local provider's console client.
    const consoleUrl = /Console: +(http:\/\/\S+)/.exec(output)?.[1];
    expect(consoleUrl).toBe(`${base}/console/`);
    const page = await fetch(consoleUrl!);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<script type="module"[^>]* src="\/console\/[^"]+\.js"/);
    expect(await (await fetch(`${base}/console/config.json`)).json()).toMatchObject({ client_id: "svc-console" });
  });

  it("with the image flags on, trains the demonstration image model with `npm run images:demo` and answers an image decision", () => {
    const demo = spawnSync(BUN, [join(ROOT, "local/image-demo.ts")], { cwd: ROOT, env, encoding: "utf8", timeout: 240_000 });
    expect(demo.status, demo.stderr).toBe(0);
    expect(demo.stderr).toMatch(/ready: ft:svc-image:[0-9a-f]{32} \(held-out top-1 accuracy/);
    made.imageModel = /ready: (ft:svc-image:[0-9a-f]{32})/.exec(demo.stderr)![1]!;
    const answer = JSON.parse(demo.stdout) as { answers: Record<string, { choice: string; unknown_probability: number }> };
    expect(answer.answers.shape!.choice).toBe("circle");
    expect(answer.answers.shape!.unknown_probability).toBeLessThan(0.5);
  }, 300_000);

  it("refuses a second start while one runs, saying so plainly", () => {
    const second = spawnSync(BUN, [join(ROOT, "local/start.ts")], { cwd: ROOT, env, encoding: "utf8", timeout: 30_000 });
    expect(second.status).toBe(1);
    expect(second.stderr).toContain(`already running at http://127.0.0.1:${env.PORT}`);
  });

  it("makes what a user keeps: a key, a finished batch, a trained text model (image credit from the demo)", async () => {
    made.userToken = await getUserAccessToken({ issuer: `http://127.0.0.1:${Number(env.PORT) + 1}`, login: "dev-user" });
    made.key = CreatedKey.parse((await api("/v1/keys", made.userToken, { name: "kept" })).json).secret;

    const input = ["A cow in the rain.", "A bus at the stop."].map((state, i) => JSON.stringify({ custom_id: `r${i}`, body: { state, questions: { q: ANIMAL_QUESTION } } })).join("\n") + "\n";
    const created = Batch.parse((await api("/v1/batches", made.key, { idempotency_key: "kept", input_bytes: Buffer.byteLength(input) })).json);
    expect((await fetch(created.upload!.url, { method: "PUT", headers: created.upload!.headers, body: input })).status).toBe(200);
    await api(`/v1/batches/${created.id}/submit`, made.key, {});
    await until("the batch", async () => Batch.parse((await api(`/v1/batches/${created.id}`, made.key)).json), (b) => b.status === "completed", 60_000);
    made.batchId = created.id;
    made.results = await (await fetch(`${base()}/v1/batches/${created.id}/results`, { headers: { authorization: `Bearer ${made.key}` } })).text();
    expect(ResultsPage.parse(JSON.parse(made.results)).data).toHaveLength(2);

    const file = await noulFile(ANIMAL_QUESTION, animalSentences());
    const training = Training.parse((await api("/v1/trainings", made.userToken, { idempotency_key: "kept", input_bytes: Buffer.byteLength(file) })).json);
    expect((await fetch(training.upload!.url, { method: "PUT", headers: training.upload!.headers, body: file })).status).toBe(200);
    await api(`/v1/trainings/${training.id}/submit`, made.userToken, {});
    const done = await until("the training", async () => Training.parse((await api(`/v1/trainings/${training.id}`, made.userToken)).json), (t) => t.finished_at !== null, 240_000);
    expect(done.status).toBe("ready");
    made.textModel = done.model!;
    made.credit = CreditBalance.parse((await api("/v1/image-credit", made.key)).json).balance_micro_usd;
    await everythingStillWorks();
  }, 300_000);

  it("stops every process it started on Ctrl-C", async () => {
    const started = descendants(launcher.pid!);
    // Postgres, Redis, the IdP, runtime, sidecar, the edge launcher and its workerd at least.
    expect(started.length).toBeGreaterThanOrEqual(7);
    const exited = new Promise<number | null>((resolve) => launcher.once("exit", (code) => resolve(code)));
    launcher.kill("SIGINT");
    expect(await exited).toBe(0);
    await new Promise((r) => setTimeout(r, 500));
    expect(started.filter(alive)).toEqual([]);
    expect(output).toContain("Stopped.");
  });

  it("starts again over the same data, and everything the first run made still works", async () => {
    await launch();
    expect(output).toContain("Decision service is up");
    // Readiness read this run's lines, not the earlier run's (the logs are appended to).
    expect(readFileSync(join(dataDir, "logs", "runtime.log"), "utf8").match(/^RUNTIME READY /gm)).toHaveLength(2);
    await everythingStillWorks();
  }, 180_000);

  it("after the launcher is killed with SIGKILL, a new start stops what it left running and comes up with everything", async () => {
    const orphans = descendants(launcher.pid!);
    launcher.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 500));
    // Its children outlive it (each in a process group of its own) and hold the ports.
    expect(orphans.filter(alive).length).toBeGreaterThanOrEqual(5);
    expect((await fetch(`${base()}/health`)).status).toBe(200);
    await launch();
    expect(output).toContain("Stopped a process an earlier run left running");
    expect(output).toContain("Decision service is up");
    expect(orphans.filter(alive)).toEqual([]);
    await everythingStillWorks();
    expect(await interrupt()).toBe(0);
  }, 180_000);
});
