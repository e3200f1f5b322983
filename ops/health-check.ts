/**
 * The GPU host's own health check (runs with Bun on the GPU host, from the systemd units in
 * ops/gpu-host/, with the same environment as the service it checks): asks the sidecar for its health
 * report, or a runtime for its identity, over loopback, and says so in its exit status.
 *
 *     bun ops/health-check.ts sidecar              # one line per link the sidecar reports
 *     bun ops/health-check.ts runtime --wait 600   # a readiness gate: retried every second until it answers
 *
 * Exit: 0 healthy; 1 the sidecar answers but a link it reports (postgres, a runtime) is down, which
 * restarting the sidecar would not mend; 2 bad usage or missing settings; 3 no answer, a non-2xx or an
 * unreadable one (each attempt gets 10 s). The secrets (SIDECAR_SECRET, RUNTIME_SECRET, or their
 * `_FILE` forms, see server-shared/secrets.ts) are sent, never printed.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { HealthReport } from "../contract/health.ts";
import { Identity, RUNTIME_PATHS } from "../server-shared/runtime-protocol.ts";
import { SecretSource } from "../server-shared/secrets.ts";
import { SIDECAR_PATHS } from "../server-shared/sidecar-protocol.ts";

const USAGE = `Usage: bun ops/health-check.ts sidecar|runtime [--wait SECONDS] [--ready]

  sidecar          GET the sidecar's health report (SIDECAR_HOST, SIDECAR_PORT, SIDECAR_SECRET[_FILE])
  runtime          GET the runtime's identity (RUNTIME_HOST, RUNTIME_PORT, RUNTIME_SECRET[_FILE])
  --wait SECONDS   retry every second until there is an answer (exit 0 or 1) or the time is up (exit 3)
  --ready          a sidecar that answers is ready though a link is down: exit 0, the link still printed

Exit: 0 healthy, 1 answered with a link down, 2 bad usage or settings, 3 no (good) answer.
`;

export const EXIT = { healthy: 0, linkDown: 1, usage: 2, noAnswer: 3 } as const;

/** Each attempt's deadline: a sidecar's own link checks take up to 3 s each. */
const ATTEMPT_MS = 10_000;
const RETRY_MS = 1_000;

const OPTIONS = {
  wait: { type: "string" },
  ready: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

class UsageError extends Error {}

interface Target {
  tier: "sidecar" | "runtime";
  url: string;
  secret: string;
}

interface Outcome {
  code: number;
  lines: string[];
}

/** The sidecar's reply: the contract's report, whose `status` only the edge adds. */
const SidecarHealth = HealthReport.pick({ links: true });

function readArgs(argv: string[]): { tier: Target["tier"]; waitMs: number; ready: boolean } | null {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: true });
  } catch (err) {
    const option = /'(--?[A-Za-z0-9-]+)/.exec((err as Error).message)?.[1];
    throw new UsageError(option ? `cannot read option ${option}` : "cannot read the arguments");
  }
  if (parsed.values.help) return null;
  const [tier, ...rest] = parsed.positionals;
  if (tier !== "sidecar" && tier !== "runtime") throw new UsageError("say which tier to check: sidecar or runtime");
  if (rest.length > 0) throw new UsageError("one tier at a time");
  const wait = parsed.values.wait === undefined ? 0 : Number(parsed.values.wait);
  if (!Number.isFinite(wait) || wait < 0) throw new UsageError("--wait is a number of seconds");
  if (parsed.values.ready && tier !== "sidecar") throw new UsageError("--ready is for the sidecar");
  return { tier, waitMs: wait * 1000, ready: parsed.values.ready ?? false };
}

/** Where the tier listens, as a loopback caller reaches it: a wildcard address is called on 127.0.0.1. */
export function loopbackUrl(host: string | undefined, port: string | undefined, path: string): string {
  const name = !host || host === "0.0.0.0" || host === "::" || host === "[::]" ? "127.0.0.1" : host;
  const bracketed = name.includes(":") && !name.startsWith("[") ? `[${name}]` : name;
  if (!port || !/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65535) throw new UsageError(`set the port it listens on (1-65535)`);
  return `http://${bracketed}:${port}${path}`;
}

function target(tier: Target["tier"], env: Record<string, string | undefined>): Target {
  const prefix = tier === "sidecar" ? "SIDECAR" : "RUNTIME";
  const path = tier === "sidecar" ? SIDECAR_PATHS.health : RUNTIME_PATHS.identity;
  let url: string;
  try {
    url = loopbackUrl(env[`${prefix}_HOST`], env[`${prefix}_PORT`], path);
  } catch (err) {
    throw new UsageError(`${prefix}_PORT: ${(err as Error).message}`);
  }
  let secret: string | undefined;
  try {
    secret = new SecretSource(env).list(`${prefix}_SECRET`)?.send;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (!secret) throw new UsageError(`set ${prefix}_SECRET or ${prefix}_SECRET_FILE`);
  return { tier, url, secret };
}

/** One call: what it proved, worded for the journal. */
async function attempt({ tier, url, secret }: Target, deadlineMs: number): Promise<Outcome> {
  let res: Response;
  let body: unknown;
  try {
    res = await fetch(url, { headers: { authorization: `Bearer ${secret}` }, signal: AbortSignal.timeout(deadlineMs) });
    const text = await res.text();
    body = text === "" ? undefined : JSON.parse(text);
  } catch (err) {
    const why = err instanceof Error && err.name === "TimeoutError" ? `no answer within ${deadlineMs} ms` : describe(err);
    return { code: EXIT.noAnswer, lines: [`${tier} ${url}: ${why}`] };
  }
  if (!res.ok) {
    const code = z.object({ error: z.object({ code: z.string() }) }).safeParse(body);
    return { code: EXIT.noAnswer, lines: [`${tier} ${url}: answered ${res.status}${code.success ? ` ${code.data.error.code}` : ""}`] };
  }
  if (tier === "runtime") {
    const identity = Identity.safeParse(body);
    if (!identity.success) return { code: EXIT.noAnswer, lines: [`runtime ${url}: answered 200 without an identity`] };
    const { release_id, fingerprint, engine } = identity.data;
    return { code: EXIT.healthy, lines: [`${release_id} ${fingerprint.slice(0, 12)} ${engine}`] };
  }
  const report = SidecarHealth.safeParse(body);
  if (!report.success) return { code: EXIT.noAnswer, lines: [`sidecar ${url}: answered 200 without a health report`] };
  const lines = report.data.links.map((link) =>
    [link.name, link.ok ? "ok" : "down", `${link.latency_ms} ms`, link.ok ? (link.detail ?? "") : (link.error ?? "")].join("  ").trimEnd(),
  );
  const down = report.data.links.some((link) => !link.ok);
  return { code: down ? EXIT.linkDown : EXIT.healthy, lines };
}

/** A fetch failure's cause (connection refused, unknown host), never the request's headers. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as Error & { cause?: unknown }).cause;
  const code = (err as NodeJS.ErrnoException).code ?? (cause as NodeJS.ErrnoException | undefined)?.code;
  return code ? `${err.message} (${code})` : err.message;
}

/**
 * Calls until there is an answer (0 or 1) or `waitMs` has passed, a second apart; the last outcome
 * stands. Without a wait, one call.
 */
async function check(tier: Target["tier"], env: Record<string, string | undefined>, waitMs: number): Promise<Outcome> {
  const to = target(tier, env);
  const until = performance.now() + waitMs;
  for (;;) {
    const outcome = await attempt(to, waitMs > 0 ? Math.max(1, Math.min(ATTEMPT_MS, until - performance.now())) : ATTEMPT_MS);
    const left = until - performance.now();
    if (outcome.code !== EXIT.noAnswer || left <= 0) return outcome;
    await Bun.sleep(Math.min(RETRY_MS, left));
  }
}

async function main(): Promise<number> {
  let args: ReturnType<typeof readArgs>;
  let outcome: Outcome;
  try {
    args = readArgs(process.argv.slice(2));
    if (!args) {
      process.stdout.write(USAGE);
      return EXIT.healthy;
    }
    outcome = await check(args.tier, process.env, args.waitMs);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`health-check: ${err.message}`);
    console.error(USAGE);
    return EXIT.usage;
  }
  for (const line of outcome.lines) console.log(line);
  return args.ready && outcome.code === EXIT.linkDown ? EXIT.healthy : outcome.code;
}

if (import.meta.main) process.exit(await main());
