/**
 * The GPU host's systemd units (ops/gpu-host/) and their health check (ops/health-check.ts): the units
 * pass `systemd-analyze verify` and say what the deployment needs (restart, reload, drain, readiness,
 * ordering, the health timer's wiring); the example env files name every setting the tiers read; and
 * the health check, run with Bun as the units run it, against the shared stack's sidecar and runtime.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../local/tiers.ts";
import { SidecarSettings } from "../sidecar/settings.ts";
import { remember, stack } from "./support/api.ts";

const UNITS_DIR = join(ROOT, "ops/gpu-host");
const INSTALL_ROOT = "/opt/decision-service";
const BUN = join(ROOT, "node_modules/.bin/bun");
const HEALTH_CHECK = join(ROOT, "ops/health-check.ts");
const UNIT_FILES = ["decision-runtime@.service", "decision-sidecar.service", "decision-health.service", "decision-health.timer", "decision-sidecar-restart.service", "decision-gpu-host.target"];

const scratch = mkdtempSync(join(tmpdir(), "svc-gpu-host-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A unit file as sections of settings, each setting with every value it was given, in order. */
type Unit = Record<string, Record<string, string[]>>;

function parseUnit(text: string): Unit {
  const unit: Unit = {};
  let section: Record<string, string[]> | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = unit[header[1]!] ??= {};
      continue;
    }
    const eq = line.indexOf("=");
    if (!section || eq < 0) throw new Error(`not a unit file line: ${line}`);
    (section[line.slice(0, eq).trim()] ??= []).push(line.slice(eq + 1).trim());
  }
  return unit;
}

const unitText = (name: string) => readFileSync(join(UNITS_DIR, name), "utf8");
const unit = (name: string) => parseUnit(unitText(name));
/** A setting's one value (its last, as systemd reads a single-valued setting). */
const value = (u: Unit, section: string, key: string) => u[section]?.[key]?.at(-1);
/** A list setting's every entry, over all its lines. */
const entries = (u: Unit, section: string, key: string) => (u[section]?.[key] ?? []).flatMap((v) => v.split(/\s+/)).filter(Boolean);

/** Names the example env file sets (`NAME=...`), and its text. */
function envExample(name: string): { names: Set<string>; env: Record<string, string>; text: string } {
  const text = readFileSync(join(UNITS_DIR, name), "utf8");
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const setting = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (setting) env[setting[1]!] = setting[2]!;
    else if (line.trim() !== "" && !line.startsWith("#")) throw new Error(`${name}: not a setting or a comment: ${line}`);
  }
  return { names: new Set(Object.keys(env)), env, text };
}

/** The keys of a zod object schema, through the pipes and refinements around it. */
function schemaKeys(schema: unknown): string[] {
  const s = schema as { shape?: Record<string, unknown>; _zod?: { def?: { in?: unknown; innerType?: unknown; schema?: unknown } } };
  if (s.shape) return Object.keys(s.shape);
  const def = s._zod?.def;
  const inner = def?.in ?? def?.innerType ?? def?.schema;
  if (!inner) throw new Error("cannot find the object inside the settings schema");
  return schemaKeys(inner);
}

/** The settings a runtime's entry reads: its private schema's keys and the names its header documents. */
function runtimeSettingNames(entry = "runtime/main.ts"): string[] {
  const source = readFileSync(join(ROOT, entry), "utf8");
  const header = source.slice(0, source.indexOf("*/"));
  const schema = source.slice(source.indexOf("z.object({"), source.indexOf("});", source.indexOf("z.object({")));
  const names = [...header.matchAll(/\bRUNTIME_[A-Z_]+\b/g), ...schema.matchAll(/^\s+(RUNTIME_[A-Z_]+):/gm)].map((m) => m[1] ?? m[0]);
  return [...new Set(names)];
}

/** A setting the example gives directly or, for a secret, as the file that holds it. */
const gives = (names: Set<string>, setting: string) => names.has(setting) || names.has(`${setting}_FILE`);

describe("the GPU host's systemd units", () => {
  it("pass systemd-analyze verify", () => {
    const version = spawnSync("systemd-analyze", ["--version"], { encoding: "utf8" });
    if (version.error) {
      throw new Error(`systemd-analyze is not installed (${(version.error as NodeJS.ErrnoException).code}): apt-get install systemd (.ci/run does)`);
    }
    // The units as installed on a host, with this checkout as /opt/decision-service and the env files present.
    const dir = mkdtempSync(join(scratch, "units-"));
    const files: string[] = [];
    for (const name of UNIT_FILES) {
      const text = unitText(name)
        .replaceAll(INSTALL_ROOT, ROOT)
        .replace(/^EnvironmentFile=\/etc\/decision-service\/(.+)$/gm, (_, file: string) => `EnvironmentFile=${join(dir, file)}`);
      writeFileSync(join(dir, name), text);
      files.push(join(dir, name));
      // The template as one instance too, its %i resolved.
      if (name.includes("@.")) {
        writeFileSync(join(dir, name.replace("@.", "@gemma.")), text);
        files.push(join(dir, name.replace("@.", "@gemma.")));
      }
    }
    for (const env of ["sidecar.env", "runtime-gemma.env", "runtime-%i.env"]) writeFileSync(join(dir, env), "");

    const result = spawnSync("systemd-analyze", ["verify", "--man=no", ...files], { encoding: "utf8" });
    const output = `${result.stdout}${result.stderr}`;
    // verify exits 0 on a setting it ignores (a typo, a bad value) and only says so: its output counts.
    const aboutUnits = output.split("\n").filter((line) => UNIT_FILES.some((name) => line.includes(name.replace("@.", "@"))));
    expect({ status: result.status, aboutUnits }, output).toEqual({ status: 0, aboutUnits: [] });
  });

  it("run each tier as the service user from the checkout, restarting on failure, reloading secrets on HUP", () => {
    for (const [name, env] of [
      ["decision-runtime@.service", "/etc/decision-service/runtime-%i.env"],
      ["decision-sidecar.service", "/etc/decision-service/sidecar.env"],
    ] as const) {
      const u = unit(name);
      const service = u.Service!;
      expect(service.EnvironmentFile, name).toEqual([env]);
      expect(value(u, "Service", "User"), name).toBe("decision-service");
      expect(value(u, "Service", "WorkingDirectory"), name).toBe(INSTALL_ROOT);
      expect(value(u, "Service", "ExecStart"), name).toBe(`${INSTALL_ROOT}/node_modules/.bin/bun ${name.startsWith("decision-runtime") ? "${RUNTIME_ENTRY}" : "sidecar/main.ts"}`);
      expect(value(u, "Service", "Restart"), name).toBe("on-failure");
      expect(value(u, "Service", "RestartSec"), name).toBe("5");
      expect(value(u, "Service", "ExecReload"), name).toBe("/bin/kill -HUP $MAINPID");
      expect(value(u, "Service", "KillSignal"), name).toBe("SIGTERM");
      expect(value(u, "Install", "WantedBy"), name).toBe("decision-gpu-host.target");
      for (const [key, expected] of Object.entries({ NoNewPrivileges: "yes", ProtectSystem: "strict", ProtectHome: "yes", PrivateTmp: "yes" })) {
        expect(value(u, "Service", key), `${name} ${key}`).toBe(expected);
      }
    }
  });

  it("gate each start on the health check, with room for a big model to load and for the sidecar to drain", () => {
    const runtime = unit("decision-runtime@.service");
    expect(value(runtime, "Service", "ExecStartPost")).toMatch(/^\/opt\/decision-service\/node_modules\/\.bin\/bun ops\/health-check\.ts runtime --wait \d+$/);
    expect(value(runtime, "Service", "TimeoutStartSec")).toBe("600");
    expect(value(runtime, "Service", "TimeoutStopSec")).toBe("30");
    // The GPU stays reachable: no private /dev for the runtime.
    expect(value(runtime, "Service", "PrivateDevices") ?? "no").toBe("no");
    // cachedSha256 writes `<model>.sha256` beside the weights, which live in the state directory.
    expect(entries(runtime, "Service", "ReadWritePaths")).toContain("/var/lib/decision-service");
    expect(readFileSync(join(UNITS_DIR, "runtime.env.example"), "utf8")).toMatch(/^RUNTIME_MODEL_PATH=\/var\/lib\/decision-service\//m);

    const sidecar = unit("decision-sidecar.service");
    expect(value(sidecar, "Service", "ExecStartPost")).toMatch(/^\/opt\/decision-service\/node_modules\/\.bin\/bun ops\/health-check\.ts sidecar --wait \d+ --ready$/);
    // Above SIDECAR_DRAIN_MS (default 25 s), with room for the usage flush.
    expect(Number(value(sidecar, "Service", "TimeoutStopSec"))).toBe(45);
    expect(Number(envExample("sidecar.env.example").env.SIDECAR_DRAIN_MS)).toBeLessThanOrEqual(30_000);
    expect(entries(sidecar, "Unit", "After")).toContain("network-online.target");
    expect(entries(sidecar, "Unit", "Wants")).toContain("network-online.target");
  });

  it("start the runtimes before the sidecar, so they stop after it and serve while it drains", () => {
    expect(entries(unit("decision-runtime@.service"), "Unit", "Before")).toContain("decision-sidecar.service");
    const target = unit("decision-gpu-host.target");
    expect(entries(target, "Unit", "Wants")).toEqual(expect.arrayContaining(["decision-sidecar.service", "decision-health.timer"]));
    expect(value(target, "Install", "WantedBy")).toBe("multi-user.target");
  });

  it("check the sidecar every 30 s, tolerate a link that is down, and restart a sidecar that does not answer", () => {
    const timer = unit("decision-health.timer");
    expect(value(timer, "Timer", "Unit") ?? "decision-health.service").toBe("decision-health.service");
    expect(value(timer, "Timer", "OnUnitActiveSec")).toBe("30s");
    expect(value(timer, "Timer", "OnActiveSec") ?? value(timer, "Timer", "OnBootSec")).toBe("30s");

    // The timer runs while the sidecar does: a sidecar an operator stopped is not restarted behind them.
    expect(entries(unit("decision-sidecar.service"), "Unit", "Wants")).toContain("decision-health.timer");
    expect(entries(timer, "Unit", "PartOf")).toContain("decision-sidecar.service");

    const health = unit("decision-health.service");
    expect(value(health, "Service", "Type")).toBe("oneshot");
    expect(value(health, "Service", "ExecStart")).toBe(`${INSTALL_ROOT}/node_modules/.bin/bun ops/health-check.ts sidecar`);
    expect(health.Service!.EnvironmentFile).toEqual(["/etc/decision-service/sidecar.env"]);
    // Exit 1 is a link down: logged, but a restart would not mend it. Exit 3 fails the unit.
    expect(entries(health, "Service", "SuccessExitStatus")).toEqual(["1"]);
    expect(entries(health, "Unit", "OnFailure")).toEqual(["decision-sidecar-restart.service"]);

    const restart = unit("decision-sidecar-restart.service");
    expect(value(restart, "Service", "Type")).toBe("oneshot");
    expect(value(restart, "Service", "ExecStart")).toBe("/bin/systemctl restart decision-sidecar.service");
  });
});

describe("the example env files", () => {
  it("name every setting the sidecar reads, secrets as files, and no test-only setting", () => {
    const { names, env } = envExample("sidecar.env.example");
    // BULK_WORKER is JOB_WORKERS's old name, refused.
    const missing = schemaKeys(SidecarSettings).filter((key) => key !== "NEON_LOCAL_BRIDGE" && key !== "BULK_WORKER" && !gives(names, key));
    expect(missing).toEqual([]);
    expect([...names].filter((name) => name.startsWith("SVC_TEST_") || name === "NEON_LOCAL_BRIDGE" || name === "BULK_WORKER")).toEqual([]);
    expect(names).toContain("SIDECAR_SECRET_FILE");
    expect(names).not.toContain("SIDECAR_SECRET");
    expect(env.SVC_RUNTIME_SECRET_FILE).toBe("/etc/decision-service/secrets/runtime-gemma");
    expect(env.WEBHOOK_PRIVATE_TARGETS).toBe("off");
    expect(env.METRICS_SECRET_FILE).toMatch(/^\/etc\/decision-service\/secrets\//);
    expect(env.DATABASE_URL).toMatch(/^postgres:\/\/.+\.neon\.tech\/.+\?sslmode=require$/);

    // The values themselves pass the sidecar's settings, secrets read from their files.
    const asRead = Object.fromEntries(Object.entries(env).map(([name, v]) => (name.endsWith("_FILE") ? [name.slice(0, -5), "example-secret"] : [name, v])));
    const parsed = SidecarSettings.safeParse(asRead);
    expect(parsed.success, parsed.error?.message).toBe(true);
  });

  it("name every setting the runtime reads, its secret as a file, listening on loopback", () => {
    const { names, env } = envExample("runtime.env.example");
    const expected = runtimeSettingNames();
    expect(expected).toEqual(expect.arrayContaining(["RUNTIME_MODEL_PATH", "RUNTIME_SECRET", "RUNTIME_PORT", "RUNTIME_GPU"]));
    expect(expected.filter((name) => !gives(names, name))).toEqual([]);
    expect(env.RUNTIME_SECRET_FILE).toMatch(/^\/etc\/decision-service\/secrets\//);
    expect(names).not.toContain("RUNTIME_SECRET");
    expect(env).toMatchObject({ RUNTIME_HOST: "127.0.0.1", RUNTIME_GPU: "auto" });
  });

  it("start a text runtime by default, and an image runtime where its env file says so, naming every setting the image runtime reads", () => {
    expect(unit("decision-runtime@.service").Service!.Environment).toEqual(["RUNTIME_ENTRY=runtime/main.ts"]);
    const { names, env } = envExample("image-runtime.env.example");
    expect(env.RUNTIME_ENTRY).toBe("runtime/image-main.ts");
    expect(existsSync(join(ROOT, env.RUNTIME_ENTRY!))).toBe(true);
    const expected = runtimeSettingNames("runtime/image-main.ts");
    expect(expected).toEqual(expect.arrayContaining(["RUNTIME_MODEL_PATH", "RUNTIME_SECRET", "RUNTIME_PORT", "RUNTIME_MAX_VISUAL_TOKENS"]));
    expect(expected.filter((name) => !gives(names, name))).toEqual([]);
    expect(names).not.toContain("RUNTIME_SECRET");
    expect(env).toMatchObject({ RUNTIME_HOST: "127.0.0.1" });
  });

  it("explain every setting in a comment line above it", () => {
    for (const file of ["sidecar.env.example", "runtime.env.example", "image-runtime.env.example"]) {
      const lines = envExample(file).text.split("\n");
      const unexplained = lines.filter((line, i) => /^[A-Z]/.test(line) && !lines[i - 1]?.startsWith("# "));
      expect(unexplained, file).toEqual([]);
    }
  });
});

interface Outcome {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** The runner's environment without the tiers' own settings, plus `env`: as a unit's EnvironmentFile gives it. */
function healthCheck(args: string[], env: Record<string, string>): Outcome {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(SVC_|SIDECAR_|RUNTIME_|DATABASE_URL)/.test(name)));
  const result = spawnSync(BUN, [HEALTH_CHECK, ...args], { cwd: ROOT, env: { ...base, ...env }, encoding: "utf8", timeout: 50_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const explain = (outcome: Outcome) => `exit ${outcome.status}\nstdout: ${outcome.stdout}\nstderr: ${outcome.stderr}`;
const portOf = (url: string) => new URL(url).port;
const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function expectNoSecret(outcome: Outcome, ...secrets: string[]): void {
  for (const secret of secrets) {
    expect(outcome.stdout).not.toContain(secret);
    expect(outcome.stderr).not.toContain(secret);
  }
}

/** A loopback port that nothing listens on (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("ops/health-check.ts", () => {
  it("reports every link of a healthy sidecar and exits 0", () => {
    const { sidecarUrl, secrets } = stack();
    const outcome = healthCheck(["sidecar"], { SIDECAR_PORT: portOf(sidecarUrl), SIDECAR_SECRET: secrets.sidecar });
    expect(outcome.status, explain(outcome)).toBe(0);
    expect(outcome.stdout).toMatch(/^sidecar->postgres {2}ok {2}[\d.]+ ms {2}\d+ release\(s\) served here$/m);
    expect(outcome.stdout).toMatch(new RegExp(`^sidecar->runtime ${literal(stack().releaseId)} {2}ok {2}[\\d.]+ ms {2}${literal(stack().releaseId)} fingerprint [0-9a-f]{12}, engine node-llama-cpp \\S+, (cpu|cuda|vulkan) \\((prebuilt|local build).*$`, "m"));
    expectNoSecret(outcome, secrets.sidecar, secrets.runtime);
  });

  it("calls a sidecar listening on every interface on loopback, and sends the first secret of a rotation list", () => {
    const { sidecarUrl, secrets } = stack();
    const outcome = healthCheck(["sidecar"], { SIDECAR_HOST: "0.0.0.0", SIDECAR_PORT: portOf(sidecarUrl), SIDECAR_SECRET: `${secrets.sidecar},retired-secret-0123456789` });
    expect(outcome.status, explain(outcome)).toBe(0);
    expectNoSecret(outcome, secrets.sidecar);
  });

  it("exits 3 when the sidecar refuses its secret, and prints neither secret", () => {
    const { sidecarUrl, secrets } = stack();
    const wrong = remember(`wrong-sidecar-secret-${crypto.randomUUID()}`);
    const outcome = healthCheck(["sidecar"], { SIDECAR_PORT: portOf(sidecarUrl), SIDECAR_SECRET: wrong });
    expect(outcome.status, explain(outcome)).toBe(3);
    expect(outcome.stdout).toMatch(/answered 401/);
    expectNoSecret(outcome, wrong, secrets.sidecar);
  });

  it("keeps calling a sidecar that does not answer for the --wait, then exits 3", async () => {
    const port = await closedPort();
    const started = performance.now();
    const outcome = healthCheck(["sidecar", "--wait", "2"], { SIDECAR_PORT: String(port), SIDECAR_SECRET: stack().secrets.sidecar });
    expect(outcome.status, explain(outcome)).toBe(3);
    expect(performance.now() - started).toBeGreaterThanOrEqual(2000);
    expect(outcome.stdout).toContain(`http://127.0.0.1:${port}/internal/health`);
    expectNoSecret(outcome, stack().secrets.sidecar);
  });

  it("reports the runtime's identity and exits 0, with the secret given directly or as a file", () => {
    const { runtimeUrl, secrets, releaseId } = stack();
    const direct = healthCheck(["runtime"], { RUNTIME_PORT: portOf(runtimeUrl), RUNTIME_SECRET: secrets.runtime });
    expect(direct.status, explain(direct)).toBe(0);
    expect(direct.stdout).toMatch(new RegExp(`^${literal(releaseId)} [0-9a-f]{12} \\S.*\\n$`));

    const file = join(scratch, "runtime-secret");
    writeFileSync(file, `${secrets.runtime}\n`, { mode: 0o600 });
    const fromFile = healthCheck(["runtime", "--wait", "5"], { RUNTIME_PORT: portOf(runtimeUrl), RUNTIME_SECRET_FILE: file });
    expect(fromFile.status, explain(fromFile)).toBe(0);
    expect(fromFile.stdout).toBe(direct.stdout);
    expectNoSecret(direct, secrets.runtime);
    expectNoSecret(fromFile, secrets.runtime);
  });

  it("exits 3 when the runtime refuses its secret", () => {
    const wrong = remember(`wrong-runtime-secret-${crypto.randomUUID()}`);
    const outcome = healthCheck(["runtime"], { RUNTIME_PORT: portOf(stack().runtimeUrl), RUNTIME_SECRET: wrong });
    expect(outcome.status, explain(outcome)).toBe(3);
    expectNoSecret(outcome, wrong, stack().secrets.runtime);
  });

  it("exits 2 on bad usage and missing or conflicting settings, naming the setting and not its value", () => {
    const secret = stack().secrets.runtime;
    const port = portOf(stack().runtimeUrl);
    const cases: [string[], Record<string, string>, RegExp][] = [
      [[], { RUNTIME_PORT: port, RUNTIME_SECRET: secret }, /sidecar or runtime/],
      [["gpu"], { RUNTIME_PORT: port, RUNTIME_SECRET: secret }, /sidecar or runtime/],
      [["runtime", "--bogus"], { RUNTIME_PORT: port, RUNTIME_SECRET: secret }, /--bogus/],
      [["runtime", "--wait", "soon"], { RUNTIME_PORT: port, RUNTIME_SECRET: secret }, /--wait/],
      [["runtime", "--ready"], { RUNTIME_PORT: port, RUNTIME_SECRET: secret }, /--ready/],
      [["runtime"], { RUNTIME_SECRET: secret }, /RUNTIME_PORT/],
      [["runtime"], { RUNTIME_PORT: port }, /RUNTIME_SECRET/],
      [["runtime"], { RUNTIME_PORT: port, RUNTIME_SECRET: secret, RUNTIME_SECRET_FILE: join(scratch, "runtime-secret") }, /RUNTIME_SECRET_FILE/],
      [["sidecar"], { SIDECAR_PORT: port, SIDECAR_SECRET_FILE: join(scratch, "no-such-file") }, /SIDECAR_SECRET_FILE.*ENOENT/],
    ];
    for (const [args, env, message] of cases) {
      const outcome = healthCheck(args, env);
      expect(outcome.status, `${args.join(" ")}: ${explain(outcome)}`).toBe(2);
      expect(outcome.stderr).toMatch(message);
      expectNoSecret(outcome, secret);
    }
  });

  it("prints its usage on --help", () => {
    const outcome = healthCheck(["--help"], {});
    expect(outcome.status, explain(outcome)).toBe(0);
    expect(outcome.stdout).toMatch(/^Usage: bun ops\/health-check\.ts sidecar\|runtime/);
  });
});

describe("the units' files", () => {
  it("are all listed here, so none escapes verification", () => {
    const units = readdirSync(UNITS_DIR).filter((name) => /\.(service|timer|target)$/.test(name));
    expect(units.sort()).toEqual([...UNIT_FILES].sort());
  });
});
