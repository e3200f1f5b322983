/**
 * `npm start`'s launcher (local/start.ts under Bun) as a user runs it, with the image flags on: it
 * comes up and prints where everything listens, `npm run images:demo` trains the demonstration image
 * model and answers an image decision with it, a second start says plainly that one is running, and
 * Ctrl-C stops every process it started.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePortPair } from "../local/ports.ts";
import { ROOT } from "../local/tiers.ts";

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
  launcher = spawn(BUN, [join(ROOT, "local/start.ts")], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  launcher.stdout?.on("data", (chunk) => (output += chunk));
  launcher.stderr?.on("data", (chunk) => (output += chunk));
  const deadline = Date.now() + 120_000;
  while (!output.includes("Press Ctrl-C") && launcher.exitCode === null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
  }
});

afterAll(() => {
  if (launcher.exitCode === null) launcher.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

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
    const answer = JSON.parse(demo.stdout) as { answers: Record<string, { choice: string; unknown_probability: number }> };
    expect(answer.answers.shape!.choice).toBe("circle");
    expect(answer.answers.shape!.unknown_probability).toBeLessThan(0.5);
  }, 300_000);

  it("refuses a second start while one runs, saying so plainly", () => {
    const second = spawnSync(BUN, [join(ROOT, "local/start.ts")], { cwd: ROOT, env, encoding: "utf8", timeout: 30_000 });
    expect(second.status).toBe(1);
    expect(second.stderr).toContain(`already running at http://127.0.0.1:${env.PORT}`);
  });

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
});
