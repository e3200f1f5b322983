/**
 * The `svc` command-line tool (clients/cli) as a user runs it: the built bundle started by Node as a
 * real process, against the real stack. The no-echo prompt is driven through a real pseudo-terminal
 * (`script` from util-linux), Ctrl-C is a real SIGINT, the browser sign-in walks the local identity
 * provider's real pages to the CLI's own loopback listener, and the packed tarballs are installed
 * with npm and run by plain Node without Bun; `svc train` follows one real training on the shared
 * runtime; `svc webhooks` registers a real loopback receiver and reads its real delivery. A loopback fake (test/support/fake-service.ts) stands in for the service only where a
 * test must prove that nothing was sent to it.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Batch, BatchList } from "../contract/batches.ts";
import { CreatedKey, KeyList, KeyMetadata } from "../contract/keys.ts";
import { DecisionResponse } from "../contract/decision.ts";
import { parseJson, type JsonMap } from "../contract/json.ts";
import { ModelList } from "../contract/models.ts";
import { EvaluationReport, Training, TrainingList } from "../contract/trainings.ts";
import { verifyWebhook } from "../contract/webhook-signature.ts";
import { WEBHOOK_EVENTS, WebhookDeliveryList, WebhookEndpoint, WebhookEndpointList, WebhookEndpointWithSecret, WebhookEvent } from "../contract/webhooks.ts";
import { VERSION } from "../clients/sdk-ts/src/index.ts";
import { browseSignIn } from "./support/browser.ts";
import { buildClients, inTerminal, ROOT, shellQuote, start, SVC, svc, userEnv, type Outcome } from "./support/cli.ts";
import { call, newAccount, query, remember, stack } from "./support/api.ts";
import { fakeServiceAnswering, type Fake } from "./support/fake-service.ts";
import { plainNodeEnv, run } from "./support/plain-node.ts";
import { animalSentences, noulFile } from "./support/training.ts";
import { startReceiver } from "./support/webhook-receiver.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

let account: Account;
const homes: string[] = [];
const fakes: Fake[] = [];

beforeAll(async () => {
  buildClients();
  account = await newAccount();
});

afterEach(async () => {
  await Promise.all(fakes.splice(0).map((fake) => fake.stop()));
});

afterAll(() => {
  for (const home of homes) rmSync(home, { recursive: true, force: true });
});

/** A fresh HOME for one user of the tool. */
function newHome(): string {
  const home = mkdtempSync(join(tmpdir(), "svc-cli-home-"));
  homes.push(home);
  return home;
}

/** A fake service that counts the requests it gets (and answers each with 503). */
async function countingFake(): Promise<Fake> {
  const fake = await fakeServiceAnswering(503);
  fakes.push(fake);
  return fake;
}

/** The environment of a user with `key` and the stack's address in SVC_API_KEY and SVC_BASE_URL. */
const withKey = (home: string, extra: Record<string, string> = {}) => userEnv(home, { SVC_API_KEY: account.key.secret, SVC_BASE_URL: stack().baseUrl, ...extra });

/** A well-formed API key that the service does not know. */
const unknownKey = () => remember(`svc_${"a".repeat(26)}_${randomBytes(32).toString("base64url")}`);

function expectExit(outcome: Outcome, code: number): void {
  expect(outcome.code, `exit ${outcome.code}\nstdout: ${outcome.stdout}\nstderr: ${outcome.stderr}`).toBe(code);
}

/** Writes `files` (name -> content) into a new folder and returns its path. */
function folder(files: Record<string, string | Buffer>): string {
  const dir = newHome();
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

const configOf = (home: string) => join(home, ".svc", "config.json");
const savedOf = (path: string) => JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;

/** A HOME whose saved settings hold the browser session `svc login` saves, with `user`'s access token. */
function signedInHome(user: Account, opts: { baseUrl?: string; expiresAt?: string } = {}): string {
  const home = newHome();
  mkdirSync(join(home, ".svc"), { mode: 0o700 });
  const session = { issuer: stack().issuer, client_id: "svc-cli", access_token: user.userToken, expires_at: opts.expiresAt ?? new Date(Date.now() + 3_600_000).toISOString(), subject: user.login };
  writeFileSync(configOf(home), JSON.stringify({ base_url: opts.baseUrl ?? stack().baseUrl, session }), { mode: 0o600 });
  return home;
}

describe("svc arguments", () => {
  const COMMANDS = [
    [],
    ["login"],
    ["logout"],
    ["models"],
    ["decide"],
    ["batches"],
    ["train"],
    ["keys"],
    ["webhooks"],
    ...["run", "create", "status", "cancel", "list", "results"].map((c) => ["batches", c]),
    ...["create", "status", "report", "list", "cancel", "retire"].map((c) => ["train", c]),
    ...["create", "list", "revoke"].map((c) => ["keys", c]),
    ...["create", "list", "get", "delete", "rotate-secret", "deliveries"].map((c) => ["webhooks", c]),
  ];

  it("answers --help on every command and sub-command, on standard output, exit 0", async () => {
    const home = newHome();
    for (const words of COMMANDS) {
      const outcome = await svc([...words, "--help"], { env: userEnv(home) });
      expectExit(outcome, 0);
      expect(outcome.stdout).toMatch(/^Usage: svc/);
      expect(outcome.stderr).toBe("");
    }
    expect((await svc(["decide", "--help"], { env: userEnv(home) })).stdout).toMatch(/--state[\s\S]*--questions[\s\S]*--body[\s\S]*--model[\s\S]*--timeout[\s\S]*--json/);
    expect((await svc(["train", "create", "--help"], { env: userEnv(home) })).stdout).toMatch(/--file FILE[\s\S]*--model BASE[\s\S]*--wait[\s\S]*--json/);
    expect((await svc(["train", "--help"], { env: userEnv(home) })).stdout).toMatch(/browser sign-in saved by `svc login`/);
    expect((await svc(["train", "report", "--help"], { env: userEnv(home) })).stdout).toMatch(/--label-issues[\s\S]*--json/);
    expect((await svc(["keys", "--help"], { env: userEnv(home) })).stdout).toMatch(/browser sign-in saved by `svc login`/);
    expect((await svc(["keys", "create", "--help"], { env: userEnv(home) })).stdout).toMatch(/--expires-at TIME[\s\S]*--expires-in DURATION[\s\S]*--scope SCOPE[\s\S]*--model M[\s\S]*--json/);
    expect((await svc(["webhooks", "--help"], { env: userEnv(home) })).stdout).toMatch(/browser sign-in saved by `svc login`/);
    const create = (await svc(["webhooks", "create", "--help"], { env: userEnv(home) })).stdout;
    expect(create).toMatch(/--url URL[\s\S]*--events EVENTS[\s\S]*--description TEXT[\s\S]*--json/);
    for (const event of WEBHOOK_EVENTS) expect(create).toContain(event);
  });

  it("refuses unknown flags, unknown commands and extra arguments with exit 2", async () => {
    const home = newHome();
    for (const words of COMMANDS.filter((w) => w.length > 0)) {
      const outcome = await svc([...words, "--no-such-flag"], { env: userEnv(home) });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(/unknown option --no-such-flag/);
      expect(outcome.stdout).toBe("");
    }
    expectExit(await svc(["frobnicate"], { env: userEnv(home) }), 2);
    expectExit(await svc(["batches", "frobnicate"], { env: userEnv(home) }), 2);
    expectExit(await svc(["models", "extra"], { env: userEnv(home) }), 2);
    expectExit(await svc(["batches", "status"], { env: userEnv(home) }), 2);
    expectExit(await svc(["decide", "--timeout"], { env: userEnv(home) }), 2);
  });

  it("prints its version, the SDK's, which svc-mcp shares: one version of the three TypeScript packages", async () => {
    const outcome = await svc(["--version"], { env: userEnv(newHome()) });
    expect(outcome.stdout.trim()).toBe(VERSION);
    for (const name of ["cli", "mcp", "sdk-ts"]) {
      expect(JSON.parse(readFileSync(join(ROOT, "clients", name, "package.json"), "utf8")).version).toBe(VERSION);
    }
  });
});

describe("settings precedence (SVC_API_KEY, SVC_BASE_URL, the saved file)", () => {
  /** A saved settings file in a new HOME (the default path), as `svc login` writes it. */
  function savedHome(saved: Record<string, unknown>): string {
    const home = newHome();
    mkdirSync(join(home, ".svc"), { mode: 0o700 });
    writeFileSync(configOf(home), JSON.stringify(saved), { mode: 0o600 });
    return home;
  }

  it("uses the saved key and address when SVC_API_KEY is not set", async () => {
    const home = savedHome({ base_url: stack().baseUrl, api_key: account.key.secret });
    expectExit(await svc(["models"], { env: userEnv(home) }), 0);
  });

  it("uses SVC_API_KEY over the saved key", async () => {
    const home = savedHome({ base_url: stack().baseUrl, api_key: account.key.secret });
    const refused = await svc(["models"], { env: userEnv(home, { SVC_API_KEY: unknownKey(), SVC_BASE_URL: stack().baseUrl }) });
    expectExit(refused, 1);
    expect(refused.stderr).toMatch(/401/);
    const other = savedHome({ base_url: stack().baseUrl, api_key: unknownKey() });
    expectExit(await svc(["models"], { env: withKey(other) }), 0);
  });

  it("never sends an environment key to the saved address: without SVC_BASE_URL there is none (exit 2)", async () => {
    const fake = await countingFake();
    const home = savedHome({ base_url: fake.url, api_key: unknownKey() });
    const outcome = await svc(["models"], { env: userEnv(home, { SVC_API_KEY: account.key.secret }) });
    expectExit(outcome, 2);
    expect(outcome.stderr).toMatch(/no base URL/);
    expect(fake.requests).toBe(0);
  });

  it("lets SVC_BASE_URL override the saved address of the saved key", async () => {
    const fake = await countingFake();
    const toFake = savedHome({ base_url: stack().baseUrl, api_key: account.key.secret });
    expectExit(await svc(["models"], { env: userEnv(toFake, { SVC_BASE_URL: fake.url }) }), 1);
    expect(fake.requests).toBe(1);
    const toStack = savedHome({ base_url: fake.url, api_key: account.key.secret });
    expectExit(await svc(["models"], { env: userEnv(toStack, { SVC_BASE_URL: stack().baseUrl }) }), 0);
    expect(fake.requests).toBe(1);
  });

  it("reads SVC_CONFIG_PATH instead of ~/.svc/config.json", async () => {
    const home = newHome();
    const path = join(home, "elsewhere", "svc.json");
    mkdirSync(join(home, "elsewhere"));
    writeFileSync(path, JSON.stringify({ base_url: stack().baseUrl, api_key: account.key.secret }), { mode: 0o600 });
    expectExit(await svc(["models"], { env: userEnv(home) }), 2);
    expectExit(await svc(["models"], { env: userEnv(home, { SVC_CONFIG_PATH: path }) }), 0);
  });

  it("refuses plaintext http to a remote host, and a base URL with /v1 in it (exit 2)", async () => {
    const home = newHome();
    for (const url of ["http://decisions.example.com", `${stack().baseUrl}/v1/systemone`, "ftp://127.0.0.1"]) {
      const outcome = await svc(["models"], { env: withKey(home, { SVC_BASE_URL: url }) });
      expectExit(outcome, 2);
      expect(outcome.stderr).not.toContain(account.key.secret);
    }
  });

  it("refuses a saved file that is not JSON (exit 2), and names the file, not its content", async () => {
    const home = savedHome({});
    writeFileSync(configOf(home), `{"api_key": "${account.key.secret}"`);
    const outcome = await svc(["models"], { env: userEnv(home) });
    expectExit(outcome, 2);
    expect(outcome.stderr).toContain(configOf(home));
    expect(outcome.stderr).not.toContain(account.key.secret);
  });

  it("sends SVC_DEFAULT_MODEL when a decision names no model", async () => {
    const home = newHome();
    const args = ["decide", "--state", "charged twice", "--questions", '{"q":{"type":"noul"}}'];
    const missing = await svc(args, { env: withKey(home, { SVC_DEFAULT_MODEL: "no-such-model" }) });
    expectExit(missing, 1);
    expect(missing.stderr).toMatch(/404/);
    expectExit(await svc(args, { env: withKey(home, { SVC_DEFAULT_MODEL: stack().releaseId }) }), 0);
  });
});

describe("svc login --api-key", () => {
  const login = (home: string, extra: string[] = []) => `${shellQuote(process.execPath)} ${shellQuote(SVC)} login --api-key --base-url ${shellQuote(stack().baseUrl)} ${extra.join(" ")}`;

  it("prompts on a terminal without echoing the typed key, checks it, and saves it with mode 0600 in a 0700 folder", async () => {
    const home = newHome();
    const { code, transcript } = await inTerminal(login(home), { env: userEnv(home), prompt: /API key: /, typed: `${account.key.secret}\r` });
    expect(code, transcript).toBe(0);
    expect(transcript).toContain("API key: ");
    expect(transcript).not.toContain(account.key.secret);
    expect(transcript).not.toContain(account.key.secret.slice(0, 12));
    expect(transcript).toMatch(/Signed in to .* with an API key/);
    expect(savedOf(configOf(home))).toEqual({ base_url: stack().baseUrl, api_key: account.key.secret });
    expect(statSync(configOf(home)).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, ".svc")).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(home, ".svc"))).toEqual(["config.json"]);
  });

  it("the terminal harness shows what a program leaves echoed (so the check above can fail)", async () => {
    const { transcript } = await inTerminal(`sh -c 'printf "API key: "; read line; echo done'`, { env: userEnv(newHome()), prompt: /API key: /, typed: "visible-typing\r" });
    expect(transcript).toContain("visible-typing");
  });

  it("exits 130 on Ctrl-C at the prompt and saves nothing", async () => {
    const home = newHome();
    const { code } = await inTerminal(login(home), { env: userEnv(home), prompt: /API key: /, typed: "svc_partial\u0003" });
    expect(code).toBe(130);
    expect(existsSync(configOf(home))).toBe(false);
  });

  it("reads the key from standard input with `-`", async () => {
    const home = newHome();
    const outcome = await svc(["login", "--api-key", "-", "--base-url", stack().baseUrl], { env: userEnv(home), input: `${account.key.secret}\n` });
    expectExit(outcome, 0);
    expect(savedOf(configOf(home))).toMatchObject({ api_key: account.key.secret, base_url: stack().baseUrl });
    expect(outcome.stderr + outcome.stdout).not.toContain(account.key.secret);
    expectExit(await svc(["models"], { env: userEnv(home) }), 0);
  });

  it("keeps the previous file byte for byte when the service refuses the key (exit 1), by prompt or by stdin", async () => {
    const home = newHome();
    expectExit(await svc(["login", "--api-key", "-", "--base-url", stack().baseUrl], { env: userEnv(home), input: account.key.secret }), 0);
    const before = readFileSync(configOf(home));
    const rejected = unknownKey();

    const piped = await svc(["login", "--api-key", "-"], { env: userEnv(home), input: rejected });
    expectExit(piped, 1);
    expect(piped.stderr).toMatch(/refused this key \(401 /);
    expect(piped.stderr).toMatch(/saved credentials were not changed/);
    expect(piped.stderr).not.toContain(rejected);

    const typed = await inTerminal(login(home), { env: userEnv(home), prompt: /API key: /, typed: `${rejected}\r` });
    expect(typed.code).toBe(1);
    expect(typed.transcript).not.toContain(rejected);

    expect(readFileSync(configOf(home)).equals(before)).toBe(true);
    expect(readdirSync(join(home, ".svc"))).toEqual(["config.json"]);
  });

  it("does not save a key it could not check (no service there: exit 1)", async () => {
    const fake = await countingFake();
    const home = newHome();
    const outcome = await svc(["login", "--api-key", "-", "--base-url", fake.url], { env: userEnv(home), input: account.key.secret });
    expectExit(outcome, 1);
    expect(fake.requests).toBe(1);
    expect(existsSync(configOf(home))).toBe(false);
  });

  it("refuses a key on the command line, a prompt without a terminal, and a remote http address (exit 2), echoing no key", async () => {
    const home = newHome();
    const onCommandLine = await svc(["login", "--api-key", account.key.secret, "--base-url", stack().baseUrl], { env: userEnv(home) });
    expectExit(onCommandLine, 2);
    expect(onCommandLine.stderr).not.toContain(account.key.secret);
    const inline = await svc(["login", `--api-key=${account.key.secret}`], { env: userEnv(home) });
    expectExit(inline, 2);
    expect(inline.stderr).not.toContain(account.key.secret);
    expectExit(await svc(["login", "--api-key", "--base-url", stack().baseUrl], { env: userEnv(home), input: account.key.secret }), 2);
    expectExit(await svc(["login", "--api-key", "-", "--base-url", "http://decisions.example.com"], { env: userEnv(home), input: account.key.secret }), 2);
    expectExit(await svc(["login", "--api-key", "-"], { env: userEnv(home), input: account.key.secret }), 2);
    expect(existsSync(configOf(home))).toBe(false);
  });
});

describe("svc logout", () => {
  it("removes the saved key and session, keeps the address, and does not revoke the key", async () => {
    const home = newHome();
    expectExit(await svc(["login", "--api-key", "-", "--base-url", stack().baseUrl], { env: userEnv(home), input: account.key.secret }), 0);
    const saved = savedOf(configOf(home));
    writeFileSync(configOf(home), JSON.stringify({ ...saved, session: { issuer: stack().issuer, client_id: "svc-cli", access_token: "t", expires_at: new Date().toISOString() } }));
    const outcome = await svc(["logout"], { env: userEnv(home) });
    expectExit(outcome, 0);
    expect(outcome.stderr).toMatch(/Removed the saved API key and browser session/);
    expect(savedOf(configOf(home))).toEqual({ base_url: stack().baseUrl });
    expectExit(await svc(["models"], { env: userEnv(home) }), 2);
    // The key itself still works.
    expect((await call("/v1/models", { token: account.key.secret })).status).toBe(200);
    expectExit(await svc(["logout"], { env: userEnv(home) }), 0);
  });
});

describe("svc login (browser sign-in)", () => {
  it("the edge names its identity provider and the CLI's public client at GET /v1/sign-in, without credentials", async () => {
    const reply = await call("/v1/sign-in");
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ issuer: stack().issuer, client_id: "svc-cli", scope: "openid keys" });
  });

  it("prints the address, survives having no browser, and saves the session the provider's real pages give its loopback listener", async () => {
    const home = newHome();
    // A BROWSER that does not exist: the CLI tries it, fails quietly, and waits for the printed address.
    const running = start(["login", "--base-url", stack().baseUrl], { env: userEnv(home, { BROWSER: join(home, "no-such-browser") }) });
    const [address] = await running.waitFor(/http:\/\/127\.0\.0\.1:\d+\/auth\?\S+/);
    const url = new URL(address);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    expect(url.searchParams.get("client_id")).toBe("svc-cli");
    const redirect = new URL(url.searchParams.get("redirect_uri")!);
    expect(redirect.hostname).toBe("127.0.0.1");
    expect(redirect.pathname).toBe("/callback");

    // A request with another state is not the provider's answer: refused, and the CLI keeps waiting.
    const forged = await fetch(`${redirect.origin}/callback?code=forged&state=other`);
    expect(forged.status).toBe(400);

    const login = `cli-user-${randomBytes(4).toString("hex")}`;
    const page = await browseSignIn(address, { login });
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/Signed in/);
    const outcome = await running.exit;
    expectExit(outcome, 0);
    expect(outcome.stderr).toMatch(new RegExp(`Signed in to .* as ${login}`));

    const saved = savedOf(configOf(home)) as { base_url: string; api_key?: string; session: { access_token: string; refresh_token?: string; subject: string; issuer: string } };
    remember(saved.session.access_token);
    if (saved.session.refresh_token) remember(saved.session.refresh_token);
    expect(saved.base_url).toBe(stack().baseUrl);
    expect(saved.api_key).toBeUndefined();
    expect(saved.session).toMatchObject({ issuer: stack().issuer, client_id: "svc-cli", subject: login });
    expect(statSync(configOf(home)).mode & 0o777).toBe(0o600);
    expect(outcome.stderr + outcome.stdout).not.toContain(saved.session.access_token);

    // The session's token is a real user access token of the key routes; the sign-in made no key.
    const keys = await call<{ keys: unknown[] }>("/v1/keys", { token: saved.session.access_token });
    expect(keys.status).toBe(200);
    expect(keys.body.keys).toEqual([]);
  });

  it("keeps a key saved for the same deployment, and is stopped by Ctrl-C (exit 130)", async () => {
    const home = newHome();
    expectExit(await svc(["login", "--api-key", "-", "--base-url", stack().baseUrl], { env: userEnv(home), input: account.key.secret }), 0);
    const running = start(["login", "--no-browser"], { env: userEnv(home) });
    const [address] = await running.waitFor(/http:\/\/127\.0\.0\.1:\d+\/auth\?\S+/);
    await browseSignIn(address, { login: "dev-user" });
    expectExit(await running.exit, 0);
    const saved = savedOf(configOf(home)) as { api_key: string; session: { access_token: string } };
    remember(saved.session.access_token);
    expect(saved.api_key).toBe(account.key.secret);

    const waiting = start(["login", "--no-browser"], { env: userEnv(home) });
    await waiting.waitFor(/Waiting for the browser/);
    waiting.child.kill("SIGINT");
    expectExit(await waiting.exit, 130);
  });
});

describe("svc models", () => {
  it("lists the key's models readably, and as the response JSON with --json", async () => {
    const home = newHome();
    const readable = await svc(["models"], { env: withKey(home) });
    expectExit(readable, 0);
    expect(readable.stdout).toMatch(/^NAME\s+ALIASES\s+RELEASED\s+DESCRIPTION/);
    expect(readable.stdout).toContain(stack().releaseId);
    expect(readable.stdout).toContain("svc-shared");
    const json = await svc(["models", "--json"], { env: withKey(home) });
    expectExit(json, 0);
    const listed = ModelList.parse(JSON.parse(json.stdout));
    expect(listed).toEqual((await call("/v1/models", { token: account.key.secret })).body);
  });

  it("exits 1 for a refused key and for a service that cannot be reached, 2 without a key", async () => {
    const home = newHome();
    const refused = await svc(["models"], { env: withKey(home, { SVC_API_KEY: unknownKey() }) });
    expectExit(refused, 1);
    expect(refused.stderr).toMatch(/^svc: 401 invalid_credentials: .*\(request req_[0-9a-f]+\)/m);
    const closed = await svc(["models"], { env: withKey(home, { SVC_BASE_URL: "http://127.0.0.1:9" }) });
    expectExit(closed, 1);
    expect(closed.stderr).toMatch(/connection/);
    const none = await svc(["models"], { env: userEnv(home) });
    expectExit(none, 2);
    expect(none.stderr).toMatch(/svc login --api-key/);
  });
});

describe("svc decide", () => {
  // Question ids and option names that a JavaScript object would reorder ("2" and "10" first).
  const QUESTIONS = '{"money":{"type":"noul","instructions":"Is it about money?"},"2":{"type":"choice","criteria":{"refund":null,"10":"ten","bug":"a defect"}},"level":{"type":"score","criteria":["low","medium","high"]}}';
  const ORDER = ["money", "2", "level"];

  function expectAnswers(stdout: string): void {
    const map = parseJson(stdout) as JsonMap;
    const response = DecisionResponse.parse(map);
    expect([...response.answers.keys()]).toEqual(ORDER);
    expect(response.model).toBe(stack().releaseId);
    expect(response.answers.get("money")).toMatchObject({ type: "noul" });
    expect(response.answers.get("2")).toMatchObject({ type: "choice" });
    expect(response.answers.get("level")).toMatchObject({ type: "score" });
  }

  it("prints each answer with its probabilities and a bar per option, in the request's order; usage on stderr", async () => {
    const outcome = await svc(["decide", "--state", "I was charged twice for one order", "--questions", QUESTIONS], { env: withKey(newHome()) });
    expectExit(outcome, 0);
    const lines = outcome.stdout.split("\n");
    expect(lines.filter((line) => !line.startsWith(" ") && line !== "").map((line) => line.split(" ")[0])).toEqual(ORDER);
    expect(outcome.stdout).toMatch(/^money {2}noul {2}(true|false) \(p\(true\) = 0\.\d{3}\)$/m);
    expect(outcome.stdout).toMatch(/^ {2}true {3}0\.\d{3} {2}[█░]{20}$/m);
    expect(lines.filter((line) => /^ {2}(refund|10|bug) /.test(line)).map((line) => line.trim().split(" ")[0])).toEqual(["refund", "10", "bug"]);
    expect(outcome.stdout).toMatch(/^level {2}score {2}\d\.\d{2} of 0-2 \(confidence 0\.\d{3}\)$/m);
    expect(outcome.stdout).toMatch(/^ {2}2 high +0\.\d{3} {2}[█░]{20}$/m);
    expect(outcome.stderr).toMatch(new RegExp(`^model ${stack().releaseId} · \\d+ input tokens, \\d+ billable, \\d+ output · request req_`, "m"));
  });

  it("takes the state and the questions from files (@), and prints the response JSON with --json", async () => {
    const dir = folder({ "state.json": '{"ticket":"I was charged twice","amount":"12 EUR"}', "questions.json": QUESTIONS });
    const outcome = await svc(["decide", "--state", `@${join(dir, "state.json")}`, "--questions", `@${join(dir, "questions.json")}`, "--json"], { env: withKey(newHome()) });
    expectExit(outcome, 0);
    expectAnswers(outcome.stdout);
    expect(outcome.stderr).toBe("");
  });

  it("reads the state, or the questions, or the whole body from standard input (-)", async () => {
    const dir = folder({ "questions.json": QUESTIONS, "body.json": `{"state":["a","b"],"questions":${QUESTIONS},"model":"svc-shared"}` });
    const env = withKey(newHome());
    expectAnswers((await svc(["decide", "--state", "-", "--questions", `@${join(dir, "questions.json")}`, "--json"], { env, input: "plain text from a pipe" })).stdout);
    expectAnswers((await svc(["decide", "--state", "a ticket", "--questions", "-", "--json"], { env, input: QUESTIONS })).stdout);
    expectAnswers((await svc(["decide", "--body", "-", "--json"], { env, input: readFileSync(join(dir, "body.json")) })).stdout);
    expectAnswers((await svc(["decide", "--body", `@${join(dir, "body.json")}`, "--json"], { env })).stdout);
  });

  it("takes --model over the body's model", async () => {
    const dir = folder({ "body.json": `{"state":"s","questions":{"q":{"type":"noul"}},"model":"svc-shared"}` });
    const outcome = await svc(["decide", "--body", `@${join(dir, "body.json")}`, "--model", "no-such-model"], { env: withKey(newHome()) });
    expectExit(outcome, 1);
    expect(outcome.stderr).toMatch(/^svc: 404 /m);
  });

  it("refuses invalid input with exit 2 and sends nothing", async () => {
    const fake = await countingFake();
    const env = withKey(newHome(), { SVC_BASE_URL: fake.url });
    const dir = folder({ "big.txt": "x".repeat(1024 * 1024 + 1), "latin1.txt": Buffer.from([0x63, 0x61, 0x66, 0xe9]), "q.json": QUESTIONS });
    const cases: Array<[string[], string | undefined, RegExp]> = [
      [["--state", "-", "--questions", "-"], "x", /only one option may read standard input/],
      [["--state", "s", "--questions", QUESTIONS, "--body", `@${join(dir, "q.json")}`], undefined, /cannot be combined/],
      [["--state", "s"], undefined, /give --state and --questions/],
      [["--state", `@${join(dir, "missing.txt")}`, "--questions", QUESTIONS], undefined, /cannot read .*missing\.txt: no such file/],
      [["--state", `@${join(dir, "big.txt")}`, "--questions", QUESTIONS], undefined, /larger than 1 MiB/],
      [["--state", "-", "--questions", QUESTIONS], "y".repeat(1024 * 1024 + 1), /standard input is larger than 1 MiB/],
      [["--state", `@${join(dir, "latin1.txt")}`, "--questions", QUESTIONS], undefined, /not UTF-8/],
      [["--state", "{not json", "--questions", QUESTIONS], undefined, /--state is not valid JSON/],
      [["--state", "s", "--questions", '{"q":{"type":"noul"},"q":{"type":"noul"}}'], undefined, /appears twice/],
      [["--state", "s", "--questions", '["not", "an object"]'], undefined, /must be a JSON object/],
      [["--state", "s", "--questions", '{"q":{"type":"choice","criteria":{"only":null}}}'], undefined, /questions\.q\.criteria: a choice needs at least 2 options/],
      [["--state", "s", "--questions", '{"q":{"type":"maybe"}}'], undefined, /type must be/],
      [["--state", "s", "--questions", '{"q":{"type":"noul"}}', "--timeout", "soon"], undefined, /--timeout is a number of seconds/],
      [["--body", `@${join(dir, "q.json")}`], undefined, /--body: invalid request/],
    ];
    for (const [args, input, message] of cases) {
      const outcome = await svc(["decide", ...args], { env, input });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(message);
      expect(outcome.stdout).toBe("");
    }
    expect(fake.requests).toBe(0);
  });

  it("exits 1 when the service refuses or does not answer in time", async () => {
    const args = ["decide", "--state", "s", "--questions", '{"q":{"type":"noul"}}'];
    const refused = await svc(args, { env: withKey(newHome(), { SVC_API_KEY: unknownKey() }) });
    expectExit(refused, 1);
    expect(refused.stderr).toMatch(/401/);
    const late = await svc([...args, "--timeout", "0.001"], { env: withKey(newHome()) });
    expectExit(late, 1);
    expect(late.stderr).toMatch(/no response from the service within 1 ms/);
  });

  it("aborts the request and exits 130 on a real SIGINT during a decision", async () => {
    // About a dozen model passes over a long state: seconds of work, so the signal lands mid-decision.
    const options = Object.fromEntries(Array.from({ length: 255 }, (_, i) => [`option ${i}`, null]));
    const state = "The customer writes that the order arrived late and damaged. ".repeat(40);
    const dir = folder({ "q.json": JSON.stringify({ which: { type: "choice", criteria: options } }) });
    const started = Date.now();
    const running = start(["decide", "--state", state, "--questions", `@${join(dir, "q.json")}`], { env: withKey(newHome()) });
    running.child.stdin.end();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(running.child.exitCode).toBeNull();
    const signalled = Date.now();
    running.child.kill("SIGINT");
    const outcome = await running.exit;
    expectExit(outcome, 130);
    expect(Date.now() - signalled).toBeLessThan(2000);
    expect(outcome.stdout).toBe("");
    expect(outcome.stderr).toMatch(/^svc: interrupted$/m);
    expect(signalled - started).toBeGreaterThanOrEqual(1000);
  });
});

describe("svc batches", () => {
  const record = (id: string, body: object) => JSON.stringify({ custom_id: id, body });
  const noul = (state: string) => ({ state, questions: { money: { type: "noul", instructions: "Is it about money?" } } });

  it("run: creates, uploads, submits, waits and writes the results as JSONL, in input order, with a per-record error", async () => {
    const dir = folder({
      "input.jsonl": [record("a", noul("charged twice")), record("b", { state: "s", questions: { bad: { type: "choice", criteria: { one: null } } } }), record("c", noul("late delivery"))].join("\n") + "\n",
    });
    const out = join(dir, "results.jsonl");
    const outcome = await svc(["batches", "run", join(dir, "input.jsonl"), "--output", out, "--poll-interval", "0.2"], { env: withKey(newHome()) });
    expectExit(outcome, 0);
    const id = /Batch ([0-9a-f-]{36}) /.exec(outcome.stderr)![1]!;
    expect(outcome.stderr).toMatch(/3 records from/);
    expect(outcome.stderr).toMatch(/completed: 3 of 3 records done \(1 failed\); 3 results written/);
    // Not a terminal: no bar, no carriage return.
    expect(outcome.stderr).not.toMatch(/[\r█]/);
    const lines = readFileSync(out, "utf8").trim().split("\n").map((line) => JSON.parse(line));
    expect(lines.map((line) => line.custom_id)).toEqual(["a", "b", "c"]);
    expect(lines[0].response.answers.money.type).toBe("noul");
    expect(lines[1].error).toMatchObject({ status: 422 });
    expect(lines[2].response.model).toBe(stack().releaseId);

    // The same results to standard output, and the batch's status and place in the list.
    const results = await svc(["batches", "results", id], { env: withKey(newHome()) });
    expectExit(results, 0);
    expect(results.stdout).toBe(readFileSync(out, "utf8"));
    const status = await svc(["batches", "status", id, "--json"], { env: withKey(newHome()) });
    expect(Batch.parse(JSON.parse(status.stdout))).toMatchObject({ id, status: "completed", request_counts: { total: 3, completed: 2, failed: 1 } });
    const readable = await svc(["batches", "status", id], { env: withKey(newHome()) });
    expect(readable.stdout).toMatch(/^status {10}completed$/m);
    const list = await svc(["batches", "list", "--json", "--limit", "100"], { env: withKey(newHome()) });
    expect(BatchList.parse(JSON.parse(list.stdout)).data.map((b) => b.id)).toContain(id);
  });

  it("run draws progress bars when standard error is a terminal", async () => {
    const dir = folder({ "input.jsonl": [record("a", noul("one")), record("b", noul("two"))].join("\n") });
    const command = [process.execPath, SVC, "batches", "run", join(dir, "input.jsonl"), "--output", join(dir, "out.jsonl"), "--poll-interval", "0.2"].map(shellQuote).join(" ");
    const { code, transcript } = await inTerminal(command, { env: withKey(newHome()) });
    expect(code, transcript).toBe(0);
    expect(transcript).toMatch(/uploaded \d+(\.\d)? (B|KiB)/);
    expect(transcript).toMatch(/█+░*\s+\d+%/);
    expect(transcript).toMatch(/batch completed: 2 of 2 records done/);
    expect(readFileSync(join(dir, "out.jsonl"), "utf8").trim().split("\n")).toHaveLength(2);
  });

  it("create prints the id; cancel stops it; a file the worker would refuse is refused first (exit 2), creating nothing", async () => {
    const env = withKey(newHome());
    const many = Array.from({ length: 20 }, (_, i) => record(`r${i}`, noul(`ticket ${i}: ${"words ".repeat(200)}`))).join("\n");
    const dir = folder({ "many.jsonl": many, "dupes.jsonl": `${record("x", noul("a"))}\n${record("x", noul("b"))}\n`, "gap.jsonl": `${record("x", noul("a"))}\n\n${record("y", noul("b"))}\n`, "empty.jsonl": "" });
    const created = await svc(["batches", "create", join(dir, "many.jsonl")], { env });
    expectExit(created, 0);
    const id = created.stdout.trim();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const cancelled = await svc(["batches", "cancel", id], { env });
    expectExit(cancelled, 0);
    expect(cancelled.stdout).toMatch(new RegExp(`^${id} cancelled: `));
    const notFinishedEarlier = await svc(["batches", "results", "00000000-0000-4000-8000-000000000000"], { env });
    expectExit(notFinishedEarlier, 1);
    expect(notFinishedEarlier.stderr).toMatch(/404/);

    const before = await query<{ n: string }>("SELECT count(*) AS n FROM batches WHERE account_id = $1", [account.accountId]);
    for (const [file, message] of [["dupes.jsonl", /line 2: custom_id "x" is also on line 1/], ["gap.jsonl", /line 2 is empty/], ["empty.jsonl", /holds no records/], ["missing.jsonl", /no such file/]] as const) {
      const outcome = await svc(["batches", "run", join(dir, file)], { env });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(message);
    }
    expect(await query("SELECT count(*) AS n FROM batches WHERE account_id = $1", [account.accountId])).toEqual(before);
  });

  it("create --metadata labels the batch: status shows it, --json carries it, list --status filters; a bad --status or --metadata exits 2 before sending", async () => {
    const env = withKey(newHome());
    const dir = folder({ "input.jsonl": `${record("m", noul("charged twice"))}\n` });
    const created = await svc(["batches", "create", join(dir, "input.jsonl"), "--metadata", "team=support", "--metadata", "query=a=b", "--metadata", "empty=", "--json"], { env });
    expectExit(created, 0);
    const batch = Batch.parse(JSON.parse(created.stdout));
    expect(batch.metadata).toEqual({ team: "support", query: "a=b", empty: "" });
    const cancelled = await svc(["batches", "cancel", batch.id, "--json"], { env });
    expectExit(cancelled, 0);
    const final = Batch.parse(JSON.parse(cancelled.stdout));
    expect(final.metadata).toEqual(batch.metadata);

    const readable = await svc(["batches", "status", batch.id], { env });
    expectExit(readable, 0);
    expect(readable.stdout).toMatch(/^metadata {8}team: support$/m);
    expect(readable.stdout).toMatch(/^ {16}query: a=b$/m);
    expect(Batch.parse(JSON.parse((await svc(["batches", "status", batch.id, "--json"], { env })).stdout)).metadata).toEqual(batch.metadata);

    // Listed with its status (and its metadata), and not with another one.
    const listOf = async (status: string) => {
      const outcome = await svc(["batches", "list", "--status", status, "--json", "--limit", "100"], { env });
      expectExit(outcome, 0);
      return BatchList.parse(JSON.parse(outcome.stdout)).data;
    };
    const inStatus = await listOf(final.status);
    expect(inStatus.every((b) => b.status === final.status)).toBe(true);
    expect(inStatus.find((b) => b.id === batch.id)?.metadata).toEqual(batch.metadata);
    expect((await listOf("running")).map((b) => b.id)).not.toContain(batch.id);
    const lines = await svc(["batches", "list", "--status", final.status, "--limit", "100"], { env });
    expect(lines.stdout).toMatch(new RegExp(`^${batch.id} {2}${final.status}`, "m"));

    const help = await svc(["batches", "list", "--help"], { env });
    expect(help.stdout).toMatch(/--status STATUS/);
    expect(help.stdout).toContain(["uploading", "queued", "validating", "running", "completed", "failed", "cancelled", "expired"].join(", "));
    expect((await svc(["batches", "create", "--help"], { env })).stdout).toMatch(/--metadata KEY=VALUE/);

    const fake = await countingFake();
    const toFake = userEnv(newHome(), { SVC_API_KEY: account.key.secret, SVC_BASE_URL: fake.url });
    const unknown = await svc(["batches", "list", "--status", "finished"], { env: toFake });
    expectExit(unknown, 2);
    expect(unknown.stderr).toMatch(/--status is one of uploading, queued, .*, expired/);
    const tooMany = Array.from({ length: 17 }, (_, i) => ["--metadata", `k${i}=v`]).flat();
    for (const [args, message] of [
      [["--metadata", "novalue"], /--metadata is KEY=VALUE/],
      [["--metadata", "=v"], /a --metadata key is 1 to 64 characters/],
      [["--metadata", `${"k".repeat(65)}=v`], /a --metadata key is 1 to 64 characters/],
      [["--metadata", `k=${"v".repeat(513)}`], /a --metadata value is at most 512 characters/],
      [["--metadata", "k=1", "--metadata", "k=2"], /--metadata k is given twice/],
      [tooMany, /at most 16 --metadata pairs/],
    ] as const) {
      for (const command of ["run", "create"]) {
        const outcome = await svc(["batches", command, join(dir, "input.jsonl"), ...args], { env: toFake });
        expectExit(outcome, 2);
        expect(outcome.stderr).toMatch(message);
      }
    }
    expect(fake.requests).toBe(0);
  });

  it("results of a batch that has not finished exit 1 and write no output file", async () => {
    const env = withKey(newHome());
    const dir = newHome();
    const created = await call<Batch>("/v1/batches", { token: account.key.secret, body: { idempotency_key: `unfinished-${randomBytes(4).toString("hex")}`, input_bytes: 1 } });
    expect(created.status).toBe(201);
    const outcome = await svc(["batches", "results", created.body.id, "--output", join(dir, "out.jsonl")], { env });
    expectExit(outcome, 1);
    expect(outcome.stderr).toMatch(/409 batch_not_finished/);
    expect(existsSync(join(dir, "out.jsonl"))).toBe(false);
    expectExit(await svc(["batches", "cancel", created.body.id], { env }), 0);
  });
});

describe("svc train", () => {
  // One training on the shared runtime (about 15 s), followed by every case after the first; the
  // others give the worker nothing to do, or a training cancelled as soon as it is submitted.
  const GROUP_A = { type: "noul", instructions: "Does this sentence belong to group A?" };
  let trainer: Account;
  let env: Record<string, string>;
  let examples: string;
  let trained: { id: string; model: string } | undefined;

  const needTrained = () => {
    if (!trained) throw new Error("the training of the first case did not reach ready");
    return trained;
  };

  beforeAll(async () => {
    trainer = await newAccount();
    env = userEnv(signedInHome(trainer));
    examples = join(folder({ "examples.jsonl": await noulFile(GROUP_A, animalSentences()) }), "examples.jsonl");
  });

  it("create --wait checks, uploads, submits and follows a training to ready: a progress bar, the model id on stdout, its figures", { timeout: 180_000 }, async () => {
    const dir = newHome();
    const stdout = join(dir, "stdout.txt");
    // Standard error is a terminal (the bars are drawn), standard output a file (the model id alone).
    const command = `${[process.execPath, SVC, "train", "create", "--file", examples, "--wait", "--poll-interval", "0.3"].map(shellQuote).join(" ")} > ${shellQuote(stdout)}`;
    const { code, transcript } = await inTerminal(command, { env, ms: 150_000 });
    expect(code, transcript).toBe(0);
    const model = readFileSync(stdout, "utf8");
    expect(model).toMatch(/^ft:svc-shared:[0-9a-f]{32}\n$/);
    trained = { id: /Training ([0-9a-f-]{36}): queued/.exec(transcript)![1]!, model: model.trim() };
    expect(transcript).toMatch(/Training on 48 examples from .*examples\.jsonl \(base svc-shared, questions q\)/);
    expect(transcript).toMatch(/uploaded \d+(\.\d)? (B|KiB)/);
    expect(transcript).toMatch(/█+░*\s+\d+%\s+reading examples through the base model \(\d+ of 48\)/);
    expect(transcript).toMatch(new RegExp(`Training ${trained.id} ready: model ${trained.model}, trained on 48 examples, each held out once by 5-fold cross-validation`));
    expect(transcript).toMatch(/ {2}q {2}auroc [01]\.\d{3} \(zero-shot [01]\.\d{3}\) {2}ECE [01]\.\d{3} {2}passed/);

    // The model answers decisions made with the account's API key, asked its task's questions.
    const decided = await svc(["decide", "--model", trained.model, "--state", "A donkey was grazing beside the road.", "--questions", JSON.stringify({ q: GROUP_A }), "--json"], {
      env: userEnv(newHome(), { SVC_API_KEY: trainer.key.secret, SVC_BASE_URL: stack().baseUrl }),
    });
    expectExit(decided, 0);
    expect(DecisionResponse.parse(JSON.parse(decided.stdout)).model).toBe(trained.model);
  });

  it("status shows the training readably and as its JSON; list has it, newest first", async () => {
    const { id, model } = needTrained();
    const json = await svc(["train", "status", id, "--json"], { env });
    expectExit(json, 0);
    expect(Training.parse(JSON.parse(json.stdout))).toMatchObject({ id, status: "ready", model, examples: { total: 48, held_out: 48 }, evaluation: { decision: "accepted" } });
    const readable = await svc(["train", "status", id], { env });
    expectExit(readable, 0);
    expect(readable.stdout).toMatch(/^status {10}ready$/m);
    expect(readable.stdout).toMatch(new RegExp(`^model {11}${model}$`, "m"));
    expect(readable.stdout).toMatch(/^ {2}q {2}auroc /m);
    expect(readable.stdout).toMatch(/^examples {8}48 \(each held out once by 5-fold cross-validation\)$/m);
    // The report's intervals, per-answer figures, confusion matrix and learning curve.
    expect(readable.stdout).toMatch(/^ {2}q {2}auroc [01]\.\d{3} \[[01]\.\d{3}, [01]\.\d{3}\], zero-shot .* difference .* \(95 %\); ECE [01]\.\d{3} \(noise on 48 examples up to 0\.\d{3}\)$/m);
    expect(readable.stdout).toMatch(/^ {2}q {2}per answer: true precision [01]\.\d\d recall [01]\.\d\d; false precision/m);
    expect(readable.stdout).toMatch(/^ {2}q {2}confusion \(rows: truth, columns: answer true \| false\): true \[\d+ \d+\], false \[\d+ \d+\]$/m);
    expect(readable.stdout).toMatch(/^ {2}q {2}learning curve: 12 examples [01]\.\d{3} \(zero-shot [01]\.\d{3}\) · 24 examples .* · 48 examples [01]\.\d{3}/m);

    const listed = await svc(["train", "list"], { env });
    expectExit(listed, 0);
    expect(listed.stdout.split("\n")[0]).toMatch(new RegExp(`^${id} {2}ready {7}${model} .* 48 examples {2}`));
    const page = TrainingList.parse(JSON.parse((await svc(["train", "list", "--json", "--limit", "1"], { env })).stdout));
    expect(page.data.map((t) => t.id)).toEqual([id]);
    // Another account's sign-in sees none of it.
    const stranger = userEnv(signedInHome(account));
    expect((await svc(["train", "list"], { env: stranger })).stdout).not.toContain(id);
    const hidden = await svc(["train", "status", id], { env: stranger });
    expectExit(hidden, 1);
    expect(hidden.stderr).toMatch(/404 not_found/);
  });

  it("report shows the figures, then the label audit and its first issues; --label-issues lists every one, with --json as their objects", async () => {
    const { id, model } = needTrained();
    const json = await svc(["train", "report", id, "--json"], { env });
    expectExit(json, 0);
    const report = EvaluationReport.parse(JSON.parse(json.stdout));
    expect(report).toMatchObject({ training: id, model, decision: "accepted", label_audit: { method: "confident_learning", examples: 48, has_more: false } });
    const audit = report.label_audit!;
    const heading = `Labels that look wrong: ${audit.suspected} of 48 examples (confident learning)`;
    // The labels are clean: the audit's few issues, if any, are all in the report, lowest label quality first.
    const rowOf = (issue: (typeof audit.issues)[number], rank: number) =>
      new RegExp(`^${rank}\\s+${issue.custom_id}\\s+${issue.line}\\s+q\\s+${issue.given}\\s+${issue.preferred}\\s+${issue.given_probability.toFixed(2)}\\s+${issue.preferred_probability.toFixed(2)}$`);
    const rowsOf = (stdout: string) => stdout.split("\n").filter((line) => /^\d+ {2}/.test(line));

    const readable = await svc(["train", "report", id], { env });
    expectExit(readable, 0);
    expect(readable.stdout).toMatch(/^decision {8}accepted$/m);
    expect(readable.stdout).toMatch(/^ {2}q {2}auroc [01]\.\d{3} \(zero-shot [01]\.\d{3}\) {2}ECE [01]\.\d{3} {2}passed$/m);
    expect(readable.stdout).toMatch(/^ {2}q {2}learning curve: 12 examples /m);
    expect(readable.stdout.split("\n")).toContain(heading);
    expect(readable.stdout.includes("RANK  CUSTOM_ID  LINE  QUESTION  GIVEN  PREFERRED  P(GIVEN)  P(PREFERRED)")).toBe(audit.suspected > 0);
    const rows = rowsOf(readable.stdout);
    expect(rows).toHaveLength(audit.issues.length);
    rows.forEach((row, i) => expect(row).toMatch(rowOf(audit.issues[i]!, i + 1)));
    expect(readable.stderr).not.toContain("--label-issues");

    // Every issue, paged through label_issues: the same ones in the same order.
    const all = await svc(["train", "report", id, "--label-issues", "--json"], { env });
    expectExit(all, 0);
    expect(all.stdout.split("\n").filter(Boolean).map((line) => JSON.parse(line))).toEqual(audit.issues.map((issue, i) => ({ ...issue, rank: i + 1 })));
    const table = await svc(["train", "report", id, "--label-issues"], { env });
    expectExit(table, 0);
    expect(table.stdout.split("\n")[0]).toBe(heading);
    rowsOf(table.stdout).forEach((row, i) => expect(row).toMatch(rowOf(audit.issues[i]!, i + 1)));
    expect(rowsOf(table.stdout)).toHaveLength(audit.suspected);
  });

  it("retire stops serving the trained model: decisions naming it answer 404, and a second retire too", async () => {
    const { model } = needTrained();
    const retired = await svc(["train", "retire", model], { env });
    expectExit(retired, 0);
    expect(retired.stdout).toBe(`${model} retired\n`);
    const keyEnv = userEnv(newHome(), { SVC_API_KEY: trainer.key.secret, SVC_BASE_URL: stack().baseUrl });
    const decided = await svc(["decide", "--model", model, "--state", "A cat.", "--questions", JSON.stringify({ q: GROUP_A })], { env: keyEnv });
    expectExit(decided, 1);
    expect(decided.stderr).toMatch(/404 model_not_found/);
    const again = await svc(["train", "retire", model, "--json"], { env });
    expectExit(again, 1);
    expect(again.stderr).toMatch(/404 model_not_found/);
  });

  it("create without --wait prints the training id; cancel stops it", async () => {
    const created = await svc(["train", "create", "--file", examples], { env });
    expectExit(created, 0);
    const id = created.stdout.trim();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const cancelled = await svc(["train", "cancel", id], { env });
    expectExit(cancelled, 0);
    expect(cancelled.stdout).toBe(`${id} cancelled\n`);
    const json = await svc(["train", "cancel", id, "--json"], { env });
    expect(Training.parse(JSON.parse(json.stdout))).toMatchObject({ id, status: "cancelled", model: null });
    // Newest first: the cancelled training comes before the trained one.
    const page = TrainingList.parse(JSON.parse((await svc(["train", "list", "--json"], { env })).stdout));
    expect(page.data.map((t) => t.id).slice(0, 2)).toEqual([id, needTrained().id]);
  });

  it("create --metadata labels the training, status shows it; list --status lists only that status, and refuses an unknown one (exit 2)", async () => {
    const created = await svc(["train", "create", "--file", examples, "--metadata", "team=ml", "--json"], { env });
    expectExit(created, 0);
    const training = Training.parse(JSON.parse(created.stdout));
    expect(training.metadata).toEqual({ team: "ml" });
    expectExit(await svc(["train", "cancel", training.id], { env }), 0);
    const readable = await svc(["train", "status", training.id], { env });
    expect(readable.stdout).toMatch(/^metadata {8}team: ml$/m);

    const listOf = async (status: string) => {
      const outcome = await svc(["train", "list", "--status", status, "--json", "--limit", "100"], { env });
      expectExit(outcome, 0);
      return TrainingList.parse(JSON.parse(outcome.stdout)).data;
    };
    const cancelled = await listOf("cancelled");
    expect(cancelled.every((t) => t.status === "cancelled")).toBe(true);
    expect(cancelled.find((t) => t.id === training.id)?.metadata).toEqual({ team: "ml" });
    const ready = await listOf("ready");
    expect(ready.map((t) => t.id)).not.toContain(training.id);
    expect(ready.every((t) => t.status === "ready")).toBe(true);
    expect((await svc(["train", "list", "--help"], { env })).stdout).toMatch(/--status STATUS.*accepted, ready, rejected/s);

    const fake = await countingFake();
    const toFake = userEnv(signedInHome(trainer, { baseUrl: fake.url }));
    const unknown = await svc(["train", "list", "--status", "completed"], { env: toFake });
    expectExit(unknown, 2);
    expect(unknown.stderr).toMatch(/--status is one of uploading, .*, expired/);
    expectExit(await svc(["train", "create", "--file", examples, "--metadata", "team"], { env: toFake }), 2);
    expect(fake.requests).toBe(0);
  });

  it("refuses a file the worker would refuse (exit 2, naming its line), and a --model its examples do not name, before any request", async () => {
    const fake = await countingFake();
    const toFake = userEnv(signedInHome(trainer, { baseUrl: fake.url }));
    const good = readFileSync(examples, "utf8").split("\n");
    const badLabel = [good[0], good[1]!.replace('"labels":{"q":false}', '"labels":{"q":"no"}').replace('"labels":{"q":true}', '"labels":{"q":"no"}'), ...good.slice(2)].join("\n");
    const otherQuestion = [...good.slice(0, 4), good[4]!.replace("group A", "group B"), ...good.slice(5)].join("\n");
    const dir = folder({ "label.jsonl": badLabel, "question.jsonl": otherQuestion, "few.jsonl": good.slice(0, 12).join("\n"), "json.jsonl": `${good[0]}\n{not json\n` });
    for (const [file, message] of [
      ["label.jsonl", /label\.jsonl: line 2: labels\.q: a noul question's label must be true or false/],
      ["question.jsonl", /line 5: question "q" is not asked as on the first line/],
      ["few.jsonl", /every outcome needs at least 10/],
      ["json.jsonl", /line 2/],
      ["missing.jsonl", /no such file/],
    ] as const) {
      const outcome = await svc(["train", "create", "--file", join(dir, file), "--wait"], { env: toFake });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(message);
    }
    const otherBase = await svc(["train", "create", "--file", examples, "--model", stack().releaseId], { env: toFake });
    expectExit(otherBase, 2);
    expect(otherBase.stderr).toMatch(/the examples name the base "svc-shared" \(their body\.model\), not --model/);
    expectExit(await svc(["train", "create", "--wait"], { env: toFake }), 2);
    expect(fake.requests).toBe(0);
  });

  it("needs the browser sign-in: without one, or with an expired one, exit 2 telling to run `svc login`; an API key is not one", async () => {
    const fake = await countingFake();
    const nobody = userEnv(newHome(), { SVC_API_KEY: trainer.key.secret, SVC_BASE_URL: fake.url });
    for (const args of [["list"], ["status", "00000000-0000-4000-8000-000000000000"], ["report", "00000000-0000-4000-8000-000000000000"], ["cancel", "00000000-0000-4000-8000-000000000000"], ["retire", "ft:x"], ["create", "--file", examples]]) {
      const outcome = await svc(["train", ...args], { env: nobody });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(/not signed in: training takes your browser sign-in, not an API key; run `svc login/);
    }
    const expired = await svc(["train", "list"], { env: userEnv(signedInHome(trainer, { baseUrl: fake.url, expiresAt: new Date(Date.now() - 1000).toISOString() })) });
    expectExit(expired, 2);
    expect(expired.stderr).toMatch(/browser sign-in saved in .* expired at .*: run `svc login` again/);
    expect(fake.requests).toBe(0);

    // SVC_ACCESS_TOKEN stands in for the saved session; the service refuses an API key given as one.
    const fromEnv = await svc(["train", "list", "--json"], { env: userEnv(newHome(), { SVC_ACCESS_TOKEN: trainer.userToken, SVC_BASE_URL: stack().baseUrl }) });
    expectExit(fromEnv, 0);
    expect(TrainingList.parse(JSON.parse(fromEnv.stdout)).data.length).toBeGreaterThan(0);
    const keyAsToken = await svc(["train", "list"], { env: userEnv(newHome(), { SVC_ACCESS_TOKEN: trainer.key.secret, SVC_BASE_URL: stack().baseUrl }) });
    expectExit(keyAsToken, 1);
    expect(keyAsToken.stderr).toMatch(/401 wrong_credential_kind/);
    expect(keyAsToken.stderr).not.toContain(trainer.key.secret);
  });
});

describe("svc keys", () => {
  const QUESTIONS = JSON.stringify({ money: { type: "noul", instructions: "Is it about money?" } });
  const decideWith = (secret: string, extra: string[] = []) =>
    svc(["decide", "--state", "I was charged twice", "--questions", QUESTIONS, ...extra], { env: userEnv(newHome(), { SVC_API_KEY: secret, SVC_BASE_URL: stack().baseUrl }) });

  it("create prints the secret alone on stdout; the key is listed, does what it was made for, is refused the rest, and revoke ends it", async () => {
    const user = await newAccount();
    const env = userEnv(signedInHome(user));
    const created = await svc(["keys", "create", "cli limited", "--scope", "decisions", "--model", "svc-shared", "--expires-in", "1h"], { env });
    expectExit(created, 0);
    const secret = remember(created.stdout.trimEnd());
    expect(created.stdout).toMatch(/^svc_[a-z2-7]{26}_[A-Za-z0-9_-]{43}\n$/);
    const id = /^svc_([a-z2-7]{26})_/.exec(secret)![1]!;
    expect(created.stderr).toMatch(new RegExp(`^Created key "cli limited" \\(id ${id}\\): decisions only, model svc-shared, until \\d{4}-\\d\\d-\\d\\dT`, "m"));
    expect(created.stderr).toMatch(/shown this once/);
    expect(created.stderr).not.toContain(secret);

    const listed = await svc(["keys", "list"], { env });
    expectExit(listed, 0);
    const [header, first, second] = listed.stdout.split("\n");
    expect(header).toMatch(/^NAME\s+ID\s+STATUS\s+SCOPE\s+MODELS\s+EXPIRES$/);
    expect(first).toMatch(new RegExp(`^cli limited\\s+${id}\\s+active\\s+decisions\\s+svc-shared\\s+\\d{4}-\\d\\d-\\d\\dT\\S+Z$`));
    expect(second).toMatch(new RegExp(`^test key\\s+${user.key.id}\\s+active\\s+all\\s+any\\s+never$`));
    expect(listed.stdout).not.toContain(secret);
    const json = KeyList.parse(JSON.parse((await svc(["keys", "list", "--json"], { env })).stdout));
    expect(json.keys[0]).toMatchObject({ id, name: "cli limited", status: "active", scope: "decisions", models: ["svc-shared"], revoked_at: null });
    expect(Date.parse(json.keys[0]!.expires_at!) - Date.now()).toBeGreaterThan(3_500_000);

    expectExit(await decideWith(secret), 0);
    const otherModel = await decideWith(secret, ["--model", stack().releaseId]);
    expectExit(otherModel, 1);
    expect(otherModel.stderr).toMatch(/^svc: 403 insufficient_scope: /m);
    const dir = folder({ "input.jsonl": `${JSON.stringify({ custom_id: "a", body: { state: "s", questions: JSON.parse(QUESTIONS) } })}\n` });
    const batch = await svc(["batches", "create", join(dir, "input.jsonl")], { env: userEnv(newHome(), { SVC_API_KEY: secret, SVC_BASE_URL: stack().baseUrl }) });
    expectExit(batch, 1);
    expect(batch.stderr).toMatch(/^svc: 403 insufficient_scope: .*decisions only/m);

    const revoked = await svc(["keys", "revoke", id], { env });
    expectExit(revoked, 0);
    expect(revoked.stdout).toBe(`${id} revoked\n`);
    const again = await svc(["keys", "revoke", id, "--json"], { env });
    expectExit(again, 0);
    expect(KeyMetadata.parse(JSON.parse(again.stdout))).toMatchObject({ id, status: "revoked" });
    const refused = await decideWith(secret);
    expectExit(refused, 1);
    expect(refused.stderr).toMatch(/^svc: 401 revoked_key: /m);
    expect((await svc(["keys", "list"], { env })).stdout.split("\n")[1]).toMatch(new RegExp(`^cli limited\\s+${id}\\s+revoked\\s`));
    // Another account's key is not found.
    const stranger = await svc(["keys", "revoke", user.key.id], { env: userEnv(signedInHome(account)) });
    expectExit(stranger, 1);
    expect(stranger.stderr).toMatch(/404 not_found/);
  });

  it("create --json prints the created key, secret included; --expires-at is sent as given", async () => {
    const env = userEnv(signedInHome(await newAccount()));
    const at = new Date(Date.now() + 86_400_000).toISOString();
    const created = await svc(["keys", "create", "cli json", "--expires-at", at, "--scope", "decisions_and_batches", "--model", "svc-shared", "--model", stack().releaseId, "--json"], { env });
    expectExit(created, 0);
    const key = CreatedKey.parse(JSON.parse(created.stdout));
    remember(key.secret);
    expect(key).toMatchObject({ name: "cli json", status: "active", scope: "decisions_and_batches", models: ["svc-shared", stack().releaseId] });
    expect(Date.parse(key.expires_at!)).toBe(Date.parse(at));
    expect(created.stderr).toMatch(/decisions and batches, models svc-shared, /);
    expect(created.stderr).not.toContain(key.secret);
  });

  it("refuses what it can tell is wrong before sending anything (exit 2), and needs the browser sign-in", async () => {
    const fake = await countingFake();
    const toFake = userEnv(signedInHome(account, { baseUrl: fake.url }));
    for (const [args, message] of [
      [["create"], /missing argument/],
      [["create", "a", "--expires-at", "2030-01-01"], /--expires-at is an RFC 3339 time with its offset/],
      [["create", "a", "--expires-at", "2000-01-01T00:00:00Z"], /--expires-at must be in the future/],
      [["create", "a", "--expires-at", "2099-01-01T00:00:00Z", "--expires-in", "1d"], /not both/],
      [["create", "a", "--expires-in", "30"], /--expires-in is a whole number of minutes, hours, days or weeks/],
      [["create", "a", "--scope", "batches"], /--scope is decisions or decisions_and_batches/],
      [["create", "a", ...Array.from({ length: 17 }, (_, i) => ["--model", `m${i}`]).flat()], /at most 16 models/],
      [["revoke"], /missing argument/],
      [["list", "extra"], /this command takes no arguments/],
    ] as const) {
      const outcome = await svc(["keys", ...args], { env: toFake });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(message);
      expect(outcome.stdout).toBe("");
    }
    expect(fake.requests).toBe(0);
    const nobody = userEnv(newHome(), { SVC_API_KEY: account.key.secret, SVC_BASE_URL: fake.url });
    for (const args of [["list"], ["create", "a"], ["revoke", account.key.id]]) {
      const outcome = await svc(["keys", ...args], { env: nobody });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(/not signed in: key management takes your browser sign-in, not an API key; run `svc login/);
    }
    expect(fake.requests).toBe(0);
    // SVC_ACCESS_TOKEN stands in for the saved session; the service refuses an API key given as one.
    const fromEnv = await svc(["keys", "list", "--json"], { env: userEnv(newHome(), { SVC_ACCESS_TOKEN: account.userToken, SVC_BASE_URL: stack().baseUrl }) });
    expectExit(fromEnv, 0);
    expect(KeyList.parse(JSON.parse(fromEnv.stdout)).keys.map((k) => k.id)).toContain(account.key.id);
    const keyAsToken = await svc(["keys", "list"], { env: userEnv(newHome(), { SVC_ACCESS_TOKEN: account.key.secret, SVC_BASE_URL: stack().baseUrl }) });
    expectExit(keyAsToken, 1);
    expect(keyAsToken.stderr).toMatch(/401 wrong_credential_kind/);
    expect(keyAsToken.stderr).not.toContain(account.key.secret);
  });
});

describe("svc webhooks", () => {
  const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

  it("create prints the secret alone on stdout; list, get, a real delivery in deliveries, rotate-secret and delete; --json of each parses", { timeout: 120_000 }, async () => {
    const receiver = await startReceiver();
    try {
      const user = await newAccount();
      const env = userEnv(signedInHome(user));
      const created = await svc(["webhooks", "create", "--url", receiver.url, "--events", "batch.cancelled, training.ready", "--description", "cli hook"], { env });
      expectExit(created, 0);
      const secret = remember(created.stdout.trimEnd());
      expect(created.stdout).toMatch(/^whsec_[A-Za-z0-9+/]{43}=\n$/);
      const id = new RegExp(`^Created webhook endpoint (${UUID}): batch.cancelled, training.ready to ${receiver.url.replaceAll(".", "\\.")}\\.$`, "m").exec(created.stderr)?.[1];
      expect(id, created.stderr).toBeDefined();
      expect(created.stderr).toMatch(/shown only now/);
      expect(created.stderr).not.toContain(secret);

      const listed = await svc(["webhooks", "list"], { env });
      expectExit(listed, 0);
      const [header, row, end] = listed.stdout.split("\n");
      expect(header).toMatch(/^ID\s+EVENTS\s+DESCRIPTION\s+URL$/);
      expect(row).toMatch(new RegExp(`^${id}\\s+batch\\.cancelled,training\\.ready\\s+cli hook\\s+${receiver.url.replaceAll(".", "\\.")}$`));
      expect(end).toBe("");
      const json = WebhookEndpointList.parse(JSON.parse((await svc(["webhooks", "list", "--json"], { env })).stdout));
      expect(json.data).toEqual([expect.objectContaining({ id, url: receiver.url, events: ["batch.cancelled", "training.ready"], description: "cli hook" })]);
      expect(JSON.stringify(json)).not.toContain(secret);
      const shown = await svc(["webhooks", "get", id!], { env });
      expectExit(shown, 0);
      expect(shown.stdout).toMatch(new RegExp(`^id\\s+${id}\\nurl\\s+${receiver.url.replaceAll(".", "\\.")}\\nevents\\s+batch\\.cancelled, training\\.ready\\ndescription\\s+cli hook\\ncreated\\s+\\S+\\n$`));
      expect(WebhookEndpoint.strict().parse(JSON.parse((await svc(["webhooks", "get", id!, "--json"], { env })).stdout))).toEqual(json.data[0]);

      // A batch of the account cancelled: its event reaches the receiver, signed with the printed secret, and shows in the log.
      const batch = await call<Batch>("/v1/batches", { token: user.key.secret, body: { idempotency_key: `cli-wh-${Date.now()}`, input_bytes: 10 } });
      expect(batch.status, JSON.stringify(batch.body)).toBe(201);
      expect((await call<Batch>(`/v1/batches/${batch.body.id}/cancel`, { token: user.key.secret, body: {} })).body.status).toBe("cancelled");
      const [received] = await receiver.waitFor(1, (r) => WebhookEvent.parse(JSON.parse(r.body)).data.id === batch.body.id);
      expect(await verifyWebhook(received!.body, received!.headers, secret)).toMatchObject({ type: "batch.cancelled", data: { id: batch.body.id } });
      const readLog = async () => {
        const outcome = await svc(["webhooks", "deliveries", id!, "--json"], { env });
        expectExit(outcome, 0);
        return WebhookDeliveryList.parse(JSON.parse(outcome.stdout));
      };
      let log = await readLog();
      for (const deadline = Date.now() + 30_000; log.data[0]?.status !== "delivered" && Date.now() < deadline; ) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        log = await readLog();
      }
      expect(log).toMatchObject({ has_more: false, data: [{ job_id: batch.body.id, event_type: "batch.cancelled", status: "delivered", attempts: 1, last_status_code: 200, event_id: received!.headers["webhook-id"] }] });
      const table = await svc(["webhooks", "deliveries", id!, "--limit", "5"], { env });
      expectExit(table, 0);
      expect(table.stdout.split("\n")[0]).toMatch(/^ID\s+EVENT\s+JOB\s+STATUS\s+ATTEMPTS\s+LAST\s+CREATED$/);
      expect(table.stdout.split("\n")[1]).toMatch(new RegExp(`^${log.data[0]!.id}\\s+batch\\.cancelled\\s+${batch.body.id}\\s+delivered\\s+1\\s+200\\s+\\S+$`));

      const rotated = await svc(["webhooks", "rotate-secret", id!, "--json"], { env });
      expectExit(rotated, 0);
      const endpoint = WebhookEndpointWithSecret.parse(JSON.parse(rotated.stdout));
      remember(endpoint.secret);
      expect(endpoint).toMatchObject({ id, secret_rotated_at: expect.any(String) });
      expect(endpoint.secret).not.toBe(secret);
      expect(rotated.stderr).toMatch(/the previous one also signs until \d{4}-/);
      expect(rotated.stderr).not.toContain(endpoint.secret);

      const deleted = await svc(["webhooks", "delete", id!], { env });
      expectExit(deleted, 0);
      expect(deleted.stdout).toBe(`${id} deleted\n`);
      for (const args of [["delete", id!], ["get", id!], ["deliveries", id!]]) {
        const gone = await svc(["webhooks", ...args], { env });
        expectExit(gone, 1);
        expect(gone.stderr).toMatch(/^svc: 404 not_found: /m);
      }
      expect((await svc(["webhooks", "list"], { env })).stdout).toBe("No webhook endpoints.\n");
    } finally {
      await receiver.close();
    }
  });

  it("refuses a bad --events, a missing --url or --events or a bad --limit before sending anything (exit 2); the service's refusals exit 1; needs the browser sign-in", async () => {
    const fake = await countingFake();
    const toFake = userEnv(signedInHome(account, { baseUrl: fake.url }));
    const HOOK_URL = ["--url", "https://hooks.example.com/"];
    for (const [args, message] of [
      [["create", ...HOOK_URL, "--events", "batch.done"], /--events takes event names separated by commas; "batch.done" is not one of batch.completed, batch.failed, /],
      [["create", ...HOOK_URL, "--events", "batch.completed,"], /an empty name is not one of/],
      [["create", ...HOOK_URL, "--events", "batch.failed,batch.failed"], /--events names an event twice/],
      [["create", ...HOOK_URL], /--events is required/],
      [["create", "--events", "batch.failed"], /--url is required/],
      [["create", ...HOOK_URL, "--events"], /--events needs a value/],
      [["get"], /missing argument/],
      [["delete"], /missing argument/],
      [["rotate-secret", "a", "b"], /too many arguments/],
      [["deliveries", "x", "--limit", "0"], /--limit is an integer from 1 to 100/],
      [["deliveries", "x", "--limit", "many"], /--limit is an integer from 1 to 100/],
      [["list", "extra"], /this command takes no arguments/],
    ] as const) {
      const outcome = await svc(["webhooks", ...args], { env: toFake });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(message);
      expect(outcome.stdout).toBe("");
    }
    expect(fake.requests).toBe(0);
    const nobody = userEnv(newHome(), { SVC_API_KEY: account.key.secret, SVC_BASE_URL: fake.url });
    for (const args of [["list"], ["create", ...HOOK_URL, "--events", "batch.failed"], ["deliveries", crypto.randomUUID()]]) {
      const outcome = await svc(["webhooks", ...args], { env: nobody });
      expectExit(outcome, 2);
      expect(outcome.stderr).toMatch(/not signed in: webhook management takes your browser sign-in, not an API key; run `svc login/);
    }
    expect(fake.requests).toBe(0);
    // What only the service can tell (a plain-http public address) is its 422, exit 1; nothing is created.
    const env = userEnv(signedInHome(await newAccount()));
    const refused = await svc(["webhooks", "create", "--url", "http://hooks.example.com/", "--events", "batch.failed"], { env });
    expectExit(refused, 1);
    expect(refused.stderr).toMatch(/^svc: 422 invalid_request: .*https/m);
    expect(refused.stdout).toBe("");
    expect((await svc(["webhooks", "list"], { env })).stdout).toBe("No webhook endpoints.\n");
  });
});

describe("the packed packages", () => {
  it("install with `npm install -g` from their tarballs and run under plain Node without Bun", { timeout: 300_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-pack-"));
    homes.push(dir);
    // The machine's certificate and proxy settings, which npm needs to reach the registry from here.
    const network = Object.fromEntries(
      ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])),
    );
    const env = plainNodeEnv({ ...network, npm_config_prefix: join(dir, "prefix") });
    expect(() => run("sh", ["-c", "command -v bun"], { env })).toThrow();
    for (const name of ["cli", "mcp"]) run("npm", ["pack", "--pack-destination", dir], { cwd: join(ROOT, "clients", name), env });
    const tarballs = readdirSync(dir).filter((f) => f.endsWith(".tgz")).sort();
    expect(tarballs).toEqual([`decision-service-cli-${VERSION}.tgz`, `decision-service-mcp-${VERSION}.tgz`]);
    for (const tarball of tarballs) {
      const files = run("tar", ["-tzf", join(dir, tarball)], { env }).split("\n").filter(Boolean).sort();
      expect(files.filter((f) => f.endsWith(".ts"))).toEqual([]);
      expect(files).toContain("package/README.md");
    }
    run("npm", ["install", "-g", "--no-audit", "--no-fund", "--prefer-offline", ...tarballs.map((t) => join(dir, t))], { cwd: dir, env });
    const bin = join(dir, "prefix", "bin");
    const userPath = { ...env, PATH: `${bin}:${env.PATH}`, HOME: dir };

    expect(run("svc", ["--help"], { env: userPath })).toMatch(/^Usage: svc COMMAND/);
    const models = run("svc", ["models", "--json"], { env: { ...userPath, SVC_API_KEY: account.key.secret, SVC_BASE_URL: stack().baseUrl } });
    expect(ModelList.parse(JSON.parse(models)).models.map((m) => m.name)).toContain(stack().releaseId);
    expect(run("svc", ["models"], { env: { ...userPath, SVC_API_KEY: account.key.secret, SVC_BASE_URL: stack().baseUrl } })).toContain("svc-shared");
    // The MCP server's bin starts and answers an MCP client's first request on its standard output.
    const init = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    const mcp = run("sh", ["-c", `printf '%s\\n' '${init}' | svc-mcp`], { env: userPath });
    expect(JSON.parse(mcp.trim().split("\n")[0]!)).toMatchObject({ id: 1, result: { serverInfo: { name: "decision-service", version: VERSION } } });
  });
});

describe("secrets", () => {
  it("are never printed: a key in the settings file is not in any output of a failing command", async () => {
    const home = newHome();
    mkdirSync(join(home, ".svc"));
    chmodSync(join(home, ".svc"), 0o700);
    const key = unknownKey();
    const token = remember(randomBytes(32).toString("base64url"));
    const session = { issuer: stack().issuer, client_id: "svc-cli", access_token: token, expires_at: new Date(Date.now() + 3_600_000).toISOString() };
    writeFileSync(configOf(home), JSON.stringify({ base_url: stack().baseUrl, api_key: key, session }));
    for (const args of [["models"], ["decide", "--state", "s", "--questions", '{"q":{"type":"noul"}}'], ["batches", "list"], ["train", "list"], ["train", "status", "00000000-0000-4000-8000-000000000000"], ["keys", "list"], ["keys", "create", "x"], ["webhooks", "list"]]) {
      const outcome = await svc(args, { env: userEnv(home) });
      expectExit(outcome, 1);
      for (const secret of [key, token]) {
        expect(outcome.stdout + outcome.stderr).not.toContain(secret);
        expect(outcome.stdout + outcome.stderr).not.toContain(secret.slice(-20));
      }
    }
  });
});
