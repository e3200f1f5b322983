/**
 * The web console in a real browser: Debian's Chromium, headless, driven by playwright-core against
 * the shared stack (its edge serves /console from the Worker's assets; its identity provider is the
 * local OpenID provider). Each page is screenshotted under .local/console-screenshots/ and checked
 * with axe-core (no serious or critical violation), with the page's Content Security Policy in force:
 * a violation the browser reports fails the test.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createRequire } from "node:module";
import fc from "fast-check";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, createKey, query, remember, stack, withDb } from "./support/api.ts";
import { chromiumPath } from "./support/chromium.ts";
import { animalSentences, noulFile } from "./support/training.ts";
import { startReceiver } from "./support/webhook-receiver.ts";
import { creditFor, textTokensOf } from "../contract/credit.ts";
import { DEMO_QUESTION, DEMO_QUESTION_ID, demoImage, demoImages } from "../local/demo-images.ts";
import { imageTrainingFile as scriptTrainingFile, trainImageModel, uploadImage, type LabelledImage } from "../local/image-api.ts";
import { imageTrainingFile, missingForTraining, type PickedImage } from "../console/src/image-training.ts";
import { addDays, count, countTicks, dayName, dollars, labelEvery, plural } from "../console/src/usage.ts";
import { Usage, USAGE_DAYS } from "../contract/usage.ts";
import { KeyList, parseApiKey } from "../contract/keys.ts";
import { WEBHOOK_LIMITS, WEBHOOK_SECRET_PATTERN, WebhookDeliveryList, WebhookEndpoint } from "../contract/webhooks.ts";
import { validateTrainingFile } from "../contract/training-file.ts";
import { IMAGE_BASE_ALIAS, LIMITS } from "../contract/limits.ts";
import { getUserAccessToken } from "../local/user-token.ts";
import { grantCredit } from "../ops/accounts.ts";

const ROOT = resolve(import.meta.dirname, "..");
const SHOTS = join(ROOT, ".local", "console-screenshots");
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

let browser: Browser;
let context: BrowserContext;
let page: Page;
/** A training's status once it serves (Trainings.tsx STATE_WORDS.ready), never the accepted one's "training passed (not yet API ready)". */
const READY = /(?<!not yet )API ready/;

/** What the browser reported against the page's policy, and any page error. */
const violations: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: chromiumPath(),
    // The machine's network is closed: Chromium's own background traffic would only be refused.
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on("console", (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(`${message.text()} at ${JSON.stringify(message.location())}`);
  });
  page.on("pageerror", (error) => violations.push(`page error: ${error.message}`));
  // Installing Chromium on a fresh machine takes minutes.
}, 600_000);

afterAll(async () => {
  await browser?.close();
});

/** axe-core's serious and critical violations on the page as it is now (injected over the protocol, so the page's policy stays strict). */
async function accessibilityViolations(on: Page): Promise<string[]> {
  await on.evaluate(AXE);
  const result = (await on.evaluate(() => (globalThis as unknown as { axe: { run(): Promise<unknown> } }).axe.run())) as {
    violations: { id: string; impact: string | null; help: string; nodes: { target: unknown }[] }[];
  };
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help}: ${JSON.stringify(v.nodes.slice(0, 3).map((n) => n.target))}`);
}

/** A screenshot of the page under .local/console-screenshots, and its accessibility check. */
async function checkPage(name: string, on: Page = page): Promise<void> {
  await on.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  expect(await accessibilityViolations(on), `axe on ${name}`).toEqual([]);
  expect(violations, `policy violations or page errors on ${name}`).toEqual([]);
}

/** The local provider's sign-in and consent pages, as a person fills them (a new user: consent is asked). */
async function signInAt(login: string, on: Page = page): Promise<void> {
  await on.getByRole("button", { name: "Sign in" }).click();
  await on.waitForURL((url) => url.origin === stack().issuer);
  await on.locator('input[name="login"]').fill(login);
  await on.locator('input[name="password"]').fill("local");
  await on.locator('button[type="submit"]').click();
  await on.locator('button[type="submit"]').first().click();
  await on.waitForURL(`${stack().baseUrl}/console/keys`);
}

const base = () => stack().baseUrl;

/** A key as the console shows it in use: its public id's start (never its secret part). */
const masked = (secret: string) => `svc_${secret.slice(4, 12)}…`;

/** A failed wait told with what the page showed then (its text, and a screenshot named `name`). */
const showing = (on: Page, name: string) => async (err: unknown) => {
  await on.screenshot({ path: join(SHOTS, `${name}-failed.png`), fullPage: true });
  throw new Error(`${String(err)}\n${await on.locator("main").innerText()}`);
};

/** A new signed-in tab of its own (a fresh browser context: nothing in memory), its policy violations recorded. */
async function signedInTab(login: string, viewport = { width: 1280, height: 900 }): Promise<{ tab: Page; close(): Promise<void> }> {
  const own = await browser.newContext({ viewport });
  const tab = await own.newPage();
  tab.on("console", (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
  });
  tab.on("pageerror", (error) => violations.push(`page error: ${error.message}`));
  await tab.goto(`${base()}/console/`);
  await signInAt(login, tab);
  return { tab, close: () => own.close() };
}

/** The demonstration question, as an image model saves it; what a decision with it reserves at worst, and is charged for 64 visual tokens. */
const QUESTIONS = { [DEMO_QUESTION_ID]: DEMO_QUESTION };
const TEXT_TOKENS = textTokensOf(JSON.stringify({ state: "", questions: QUESTIONS }));
const WORST = creditFor(LIMITS.imageVisualTokens + TEXT_TOKENS);
const CHARGE = creditFor(64 + TEXT_TOKENS);

describe("the web console", () => {
  it("is served by the Worker at /console with a policy that allows only its own origin and the identity provider", async () => {
    const res = await fetch(`${base()}/console/`);
    expect(res.status).toBe(200);
    const policy = res.headers.get("content-security-policy")!;
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain(`connect-src 'self' ${new URL(stack().issuer).origin}`);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    const html = await res.text();
    const script = /src="(\/console\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const file = await fetch(`${base()}${script}`);
    expect(file.status).toBe(200);
    expect(file.headers.get("content-type")).toContain("javascript");
    expect(file.headers.get("content-security-policy")).toBe(policy);
    // A page route is the page; an unknown file is the 404 envelope.
    expect(await (await fetch(`${base()}/console/keys`)).text()).toBe(html);
    const missing = await fetch(`${base()}/console/nothing-here.js`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe("not_found");
    // A build of the deployable assets (as every other edge's start runs one) leaves this edge serving.
    const build = spawnSync(join(ROOT, "node_modules/.bin/bun"), ["ops/console-bundle.ts"], { cwd: ROOT, encoding: "utf8" });
    expect(build.status, build.stderr).toBe(0);
    expect((await fetch(`${base()}/console/`)).status).toBe(200);
    const config = (await (await fetch(`${base()}/console/config.json`)).json()) as { issuer: string; client_id: string };
    expect(config).toMatchObject({ issuer: stack().issuer, client_id: "svc-console", scope: "openid keys", images: { api: true, browser: true } });
  });

  it("answers any path under /console with the page, a built file or the 404 envelope, never a server error (generated paths)", async () => {
    const html = await (await fetch(`${base()}/console/`)).text();
    const segment = fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom("..", "%2e%2e", "%2F", "index.html", "style-hashes.json", "config.json", "__proto__", "a.js", "x.css", "%00", "%E2%80%A8"));
    await fc.assert(
      fc.asyncProperty(fc.array(segment, { minLength: 1, maxLength: 4 }), async (segments) => {
        const path = `/console/${segments.map((s) => (/%[0-9A-F]{2}/.test(s) ? s : encodeURIComponent(s))).join("/")}`;
        // `..` and its like are resolved by the URL itself: only what still lies under /console is the console's.
        const resolved = new URL(path, base()).pathname;
        if (!resolved.startsWith("/console/")) return;
        const res = await fetch(`${base()}${path}`, { redirect: "manual" });
        const body = await res.text();
        expect([200, 404], path).toContain(res.status);
        if (res.status === 404) expect(JSON.parse(body).error.code).toBe("not_found");
        // The configuration is JSON, with no policy of its own, by whatever path resolves to it (`a/../config.json`).
        else if (resolved !== "/console/config.json") expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
        if (res.status === 200 && res.headers.get("content-type")?.includes("text/html")) expect(body).toBe(html);
      }),
      { numRuns: 150 },
    );
  });

  it("signs in with the provider (code + PKCE), creates a key shown once, tries a decision with it, lists models, revokes it and sees the next decision refused, signs out", async () => {
    const login = `console-${process.pid}-${Date.now()}`;
    await page.goto(`${base()}/console/`);
    await expect.poll(() => page.getByRole("heading", { name: "Sign in" }).isVisible()).toBe(true);
    await checkPage("sign-in");

    await signInAt(login);
    await expect.poll(() => page.getByRole("heading", { name: "API keys" }).isVisible()).toBe(true);
    await expect.poll(() => page.getByText(login).isVisible()).toBe(true);

    // A key, its secret shown once.
    await page.getByLabel("New key's name").fill("from the console");
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = remember((await page.getByTestId("new-secret").textContent())!.trim());
    expect(secret).toMatch(/^svc_[a-z2-7]{26}_[A-Za-z0-9_-]{43}$/);
    await expect.poll(() => page.getByRole("row", { name: /from the console/ }).isVisible()).toBe(true);
    await checkPage("keys");
    // The page keeps no key anywhere the browser stores things.
    // (Expressions as text: this file is compiled without the DOM's types; they run in the page.)
    const stored = await page.evaluate<string>("JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage }, cookies: document.cookie })");
    expect(stored).not.toContain("svc_");

    // Try a decision with it.
    await page.getByRole("button", { name: "Use it in Try a decision" }).click();
    await page.waitForURL(`${base()}/console/try`);
    expect(await page.getByTestId("key-in-use").innerText()).toBe(masked(secret));
    await page.getByRole("button", { name: "Decide" }).click();
    await expect.poll(() => page.getByRole("heading", { name: /Answer from/ }).isVisible(), { timeout: 30_000 }).toBe(true);
    const answer = await page.locator("main").innerText();
    expect(answer).toMatch(/refund/);
    expect(answer).toMatch(/yes\s+0\.\d{3}/);
    expect(answer).toMatch(/Server-Timing: .*sidecar;dur=\d/);
    await checkPage("try-a-decision");

    // A choice added through the form, drawn as one bar per option.
    await page.getByLabel("Id").fill("team");
    await page.getByLabel("Instructions").fill("Which team should handle it?");
    await page.getByLabel("Type").selectOption("choice");
    // An integer-like option name keeps its place (a plain object would move it first).
    await page.getByLabel(/Options/).fill("billing, 2, engineering");
    await page.getByRole("button", { name: "Add question" }).click();
    const edited = await page.getByLabel("Questions (JSON)").inputValue();
    expect(JSON.parse(edited)).toMatchObject({ team: { type: "choice", criteria: { billing: null, 2: null, engineering: null } } });
    expect(edited.replace(/\s+/g, "")).toContain('"criteria":{"billing":null,"2":null,"engineering":null}');
    await page.getByRole("button", { name: "Decide" }).click();
    await expect.poll(() => page.getByRole("heading", { name: "team" }).isVisible(), { timeout: 30_000 }).toBe(true);
    expect(await page.locator("main").innerText()).toMatch(/billing\s+0\.\d{3}\s+2\s+0\.\d{3}\s+engineering\s+0\.\d{3}/);

    // Models, with the same key in memory.
    await page.getByRole("link", { name: "Models" }).click();
    await page.getByRole("button", { name: "List models" }).click();
    await expect.poll(() => page.getByRole("row", { name: /svc-shared/ }).isVisible()).toBe(true);
    await checkPage("models");

    // A batch from a JSONL file: uploaded with its progress shown, watched to completion, results read.
    await page.getByRole("link", { name: "Batches" }).click();
    const records = ["r-1", "r-2", "r-3"].map((id, i) => JSON.stringify({ custom_id: id, body: { model: "svc-shared", state: { ticket: `ticket ${i}: please refund me` }, questions: { refund: { type: "noul", instructions: "Does the customer ask for money back?" } } } }));
    // One record the worker refuses (its body is no decision), kept as that record's error.
    records.push(JSON.stringify({ custom_id: "r-bad", body: { questions: {} } }));
    await page.locator("#batch-file").setInputFiles({ name: "records.jsonl", mimeType: "application/jsonl", buffer: Buffer.from(records.join("\n") + "\n") });
    await page.getByRole("button", { name: "Upload and submit" }).click();
    await expect.poll(() => page.getByRole("heading", { name: /^Batch / }).isVisible(), { timeout: 30_000 }).toBe(true).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await page.locator("main").innerText()}`);
    });
    await expect.poll(() => page.getByRole("table", { name: "Results" }).isVisible(), { timeout: 90_000 }).toBe(true).catch(async (err: unknown) => {
      await page.screenshot({ path: join(SHOTS, "batches-failed.png"), fullPage: true });
      throw new Error(`${String(err)}\n${await page.locator("main").innerText()}`);
    });
    const results = await page.getByRole("table", { name: "Results" }).innerText();
    expect(results).toMatch(/r-1\s+refund: yes 0\.\d{3}/);
    expect(results).toMatch(/r-3\s+refund: yes 0\.\d{3}/);
    expect(results).toMatch(/r-bad\s+.*\(invalid_request, 422\)/);
    expect(await page.locator("main").innerText()).toMatch(/4 of 4 records done \(1 failed\)/);
    await checkPage("batches");

    // A longer batch, cancelled while it runs after the confirmation: what was committed stays readable.
    const many = Array.from({ length: 60 }, (_, i) => JSON.stringify({ custom_id: `m-${i}`, body: { model: "svc-shared", state: { ticket: `ticket ${i}` }, questions: { refund: { type: "noul", instructions: "Does the customer ask for money back?" } } } }));
    await page.locator("#batch-file").setInputFiles({ name: "many.jsonl", mimeType: "application/jsonl", buffer: Buffer.from(many.join("\n") + "\n") });
    await page.getByRole("button", { name: "Upload and submit" }).click();
    await page.getByRole("button", { name: "Cancel batch" }).click();
    await page.getByRole("alertdialog").getByRole("button", { name: "Cancel batch" }).click();
    await expect.poll(() => page.locator("main").innerText(), { timeout: 30_000 }).toMatch(/cancelled/);
    // The open batch's card comes first: fewer than the 60 records were done (none, if it was still being validated).
    const cancelled = /Batch [0-9a-f-]{36}\s+cancelled\s+(\d+) of (\d+) records done/.exec(await page.locator("main").innerText());
    expect(cancelled, await page.locator("main").innerText()).not.toBeNull();
    expect(Number(cancelled![1])).toBeLessThan(60);

    // A batch made through the API with metadata: opened from the list, its pairs are shown.
    const labelled = await call<{ id: string }>("/v1/batches", { token: secret, body: { idempotency_key: `console-${randomUUID()}`, input_bytes: 1, metadata: { team: "support", ticket: "OPS-12" } } });
    expect(labelled.status).toBe(201);
    await page.getByRole("button", { name: "List batches" }).click();
    await page.getByRole("button", { name: `Open batch ${labelled.body.id}` }).click();
    await expect.poll(() => page.getByTestId("batch-metadata").innerText()).toMatch(/^team: support\nticket: OPS-12$/);

    // Revoke it, after the confirmation; the next decision with it is refused.
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByRole("button", { name: "Revoke from the console" }).click();
    await expect.poll(() => page.getByRole("alertdialog").isVisible()).toBe(true);
    await checkPage("keys-revoke-confirmation");
    await page.getByRole("button", { name: "Revoke key" }).click();
    await expect.poll(() => page.getByRole("row", { name: /from the console/ }).innerText()).toMatch(/revoked/);
    await page.getByRole("link", { name: "Try a decision" }).click();
    await page.getByRole("button", { name: "Decide" }).click();
    await expect.poll(() => page.getByRole("alert").innerText()).toMatch(/\(\w+, 401\)/);
    expect((await call("/v1/models", { token: secret })).status).toBe(401);

    // Signing out ends the session here and at the provider.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL((url) => url.origin === stack().issuer);
    await page.getByRole("button", { name: "Yes, sign me out" }).click();
    await page.waitForURL(`${base()}/console/`);
    await expect.poll(() => page.getByRole("heading", { name: "Sign in" }).isVisible()).toBe(true);
    expect(await page.evaluate<number>("sessionStorage.length")).toBe(0);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((url) => url.origin === stack().issuer);
    expect(await page.locator('input[name="login"]').count()).toBe(1);
  }, 240_000);

  it("keeps the API key in use for the tab across its pages (memory only, shown masked), created or pasted, until it is forgotten", async () => {
    const { tab, close } = await signedInTab(`walker-${process.pid}-${Date.now()}`);
    const bar = tab.locator(".key-in-use");
    const pasteField = tab.getByLabel("API key", { exact: true });
    const go = async (title: string, path: string) => {
      await tab.getByRole("navigation", { name: "Console" }).getByRole("link", { name: title, exact: true }).click();
      await tab.waitForURL(`${base()}${path}`);
    };
    await tab.getByLabel("New key's name").fill("walker");
    await tab.getByRole("button", { name: "Create key" }).click();
    const secret = remember((await tab.getByTestId("new-secret").textContent())!.trim());
    expect(await bar.innerText()).toBe("");
    // Moving between pages loads none: what the first load put on the window is there at the end.
    await tab.evaluate("window.loadedOnce = true");

    await tab.getByRole("button", { name: "Use it in Try a decision" }).click();
    await tab.waitForURL(`${base()}/console/try`);
    await tab.getByRole("button", { name: "Decide" }).click();
    await expect.poll(() => tab.getByRole("heading", { name: /Answer from/ }).isVisible(), { timeout: 30_000 }).toBe(true);

    // Keys → Models → Try → Batches from the navigation: the key in use on each, shown masked, no field to paste into.
    await go("API keys", "/console/keys");
    await expect.poll(() => tab.getByRole("row", { name: /walker/ }).innerText()).toMatch(/in use here/);
    await go("Models", "/console/models");
    expect(await bar.innerText()).toMatch(/^API key in use: walker svc_/);
    expect(await bar.innerText()).toContain(masked(secret));
    expect(await bar.innerText()).not.toContain(secret.slice(13));
    expect(await pasteField.count()).toBe(0);
    await tab.getByRole("button", { name: "List models" }).click();
    await expect.poll(() => tab.getByRole("row", { name: /svc-shared/ }).isVisible()).toBe(true);
    await checkPage("key-in-use", tab);
    await go("Try a decision", "/console/try");
    expect(await pasteField.count()).toBe(0);
    await tab.getByRole("button", { name: "Decide" }).click();
    await expect.poll(() => tab.getByRole("heading", { name: /Answer from/ }).isVisible(), { timeout: 30_000 }).toBe(true);
    await go("Batches", "/console/batches");
    expect(await pasteField.count()).toBe(0);
    expect(await tab.getByTestId("key-in-use").innerText()).toBe(masked(secret));
    await tab.getByRole("button", { name: "List batches" }).click();
    await expect.poll(() => tab.getByRole("table", { name: "Batches" }).innerText()).toMatch(/No batches yet/);
    expect(await tab.evaluate<boolean>("window.loadedOnce === true")).toBe(true);
    const stored = await tab.evaluate<string>("JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage }, cookies: document.cookie })");
    expect(stored).not.toContain("svc_");
    expect(tab.url()).not.toContain("svc_");

    // Forgotten: gone from the bar, and every page asks for a key again.
    await tab.getByRole("button", { name: "Forget key" }).click();
    expect(await bar.innerText()).toBe("");
    expect(await pasteField.isVisible()).toBe(true);
    // The button went with the key: focus is on the field that asks for one.
    await expect.poll(() => tab.evaluate<string>("document.activeElement?.id ?? ''")).toBe("api-key");
    await checkPage("key-forgotten", tab);
    expect(await tab.getByRole("button", { name: "List batches" }).isDisabled()).toBe(true);
    for (const [title, path] of [["Models", "/console/models"], ["Try a decision", "/console/try"]] as const) {
      await go(title, path);
      expect(await pasteField.isVisible(), title).toBe(true);
    }
    expect(await tab.getByRole("button", { name: "Decide" }).isDisabled()).toBe(true);
    // What is not a key is said so, and not put in use.
    await pasteField.fill("not-a-key");
    await pasteField.press("Enter");
    await expect.poll(() => tab.locator("#api-key-help").innerText()).toMatch(/not an API key/);
    expect(await bar.innerText()).toBe("");
    // A key pasted once is in use on every page too.
    await pasteField.fill(secret);
    expect(await tab.getByTestId("key-in-use").innerText()).toBe(masked(secret));
    await go("Models", "/console/models");
    expect(await pasteField.count()).toBe(0);
    await tab.getByRole("button", { name: "List models" }).click();
    await expect.poll(() => tab.getByRole("row", { name: /svc-shared/ }).isVisible()).toBe(true);
    // Memory only: a reload forgets it.
    await tab.reload();
    await expect.poll(() => tab.getByRole("heading", { name: "Models" }).isVisible()).toBe(true);
    expect(await bar.innerText()).toBe("");
    expect(await pasteField.isVisible()).toBe(true);
    await close();
  });

  it("trains a model from a labelled file: its progress, its evaluation beside zero-shot with the diagram, training passed then API ready", async () => {
    const trainer = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tab = await trainer.newPage();
    tab.on("console", (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
    });
    await tab.goto(`${base()}/console/`);
    await signInAt(`trainer-${process.pid}-${Date.now()}`, tab);
    // An account comes with its first key.
    await tab.getByLabel("New key's name").fill("first");
    await tab.getByRole("button", { name: "Create key" }).click();
    remember((await tab.getByTestId("new-secret").textContent())!.trim());
    // The key goes with the page (memory only) for the models page at the end.
    await tab.getByRole("button", { name: "Use it in Try a decision" }).click();
    await tab.getByRole("link", { name: "Training" }).click();
    // Only the examples say what "group A" is (the animals): the base model cannot know it.
    const file = await noulFile({ type: "noul", instructions: "Does this sentence belong to group A?" }, animalSentences());
    await tab.locator("#training-file").setInputFiles({ name: "animals.jsonl", mimeType: "application/jsonl", buffer: Buffer.from(file) });
    await tab.getByRole("button", { name: "Upload and train" }).click();
    await expect.poll(() => tab.getByRole("heading", { name: /^Training / }).isVisible(), { timeout: 30_000 }).toBe(true);
    // "training passed (not yet API ready)" comes first: wait for the status itself.
    await expect.poll(() => tab.locator("main").innerText(), { timeout: 180_000 }).toMatch(READY);
    const detail = await tab.locator("main").innerText();
    expect(detail).toMatch(/Evaluation on \d+ examples, each held out once \(5-fold cross-validation\): accepted/);
    expect(detail).toMatch(/Model: ft:/);
    // The report's intervals, confusion matrix and learning curve.
    await expect.poll(() => tab.getByRole("table", { name: "Learning curve" }).isVisible()).toBe(true);
    expect(await tab.getByRole("table", { name: "Confusion matrix of q" }).innerText()).toMatch(/Answered true[\s\S]*Precision[\s\S]*Recall/);
    // The label audit's top: how many given labels look wrong, and which (a clean file: few, if any).
    expect(await tab.locator("main").innerText()).toMatch(/Labels that look wrong: \d+ of 48 examples/);
    expect(await tab.locator("main").innerText()).toMatch(/q: auroc [01]\.\d{3} \[[01]\.\d{3}, [01]\.\d{3}\] against zero-shot [01]\.\d{3}, a difference of .* \(at least .* with 95 % confidence\)/);
    const diagram = tab.getByRole("img", { name: /Reliability diagram of the trained model/ });
    await expect.poll(() => diagram.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBeGreaterThan(0);
    await checkPage("training", tab);

    // The trained model on the models page, with its evaluation report and reliability diagram.
    const model = /Model: (ft:\S+)/.exec(detail)![1]!;
    await tab.getByRole("link", { name: "Models" }).click();
    await tab.getByRole("button", { name: "List models" }).click();
    await tab.getByRole("row", { name: new RegExp(model) }).getByRole("button", { name: "Evaluation" }).click();
    await expect.poll(() => tab.getByRole("heading", { name: `Evaluation of ${model}` }).isVisible()).toBe(true);
    const evaluation = tab.getByRole("img", { name: /Reliability diagram: Evaluation of/ });
    await expect.poll(() => evaluation.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBeGreaterThan(0);
    expect(await tab.locator("main").innerText()).toContain('"decision": "accepted"');
    await checkPage("models-evaluation", tab);
    await trainer.close();
  }, 240_000);

  it("classifies a photo with an image model (Needs review for none of its answers), and runs the batch tool through a credit pause and resume", async () => {
    const login = `imager-${process.pid}-${Date.now()}`;
    const imager = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tab = await imager.newPage();
    tab.on("console", (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
    });
    await tab.goto(`${base()}/console/`);
    await signInAt(login, tab);
    await tab.getByLabel("New key's name").fill("first");
    await tab.getByRole("button", { name: "Create key" }).click();
    remember((await tab.getByTestId("new-secret").textContent())!.trim());

    // The account's demonstration model, trained through the API with the same user's token.
    const token = remember(await getUserAccessToken({ issuer: stack().issuer, login }));
    const labelled: LabelledImage[] = [];
    for (const image of await demoImages(40)) {
      labelled.push({ customId: `${image.kind}-${image.seed}`, assetId: await uploadImage(base(), token, image.png, "training"), label: image.label });
    }
    const trained = await trainImageModel(base(), token, scriptTrainingFile(labelled, QUESTIONS));
    expect(trained.status).toBe("ready");
    const balance = async () => ((await call("/v1/image-credit", { token })).body as { balance_micro_usd: number }).balance_micro_usd;
    const grant = (microUsd: number) => withDb((db) => grantCredit(db, login, { amountMicroUsd: microUsd, note: "console test" }));
    // Credit for one photo's worst case and half a charge more: after the photo below, a worst case less half a charge is left.
    await grant(WORST + Math.floor(CHARGE / 2));

    await tab.getByRole("link", { name: "Image decisions" }).click();
    await expect.poll(() => tab.getByRole("row", { name: /API ready/ }).isVisible()).toBe(true);
    expect(await tab.getByLabel("Image model (API ready)").inputValue()).toBe(trained.model);
    // One photo of none of the answers: the unknown mass is the largest.
    await tab.locator("#photo").setInputFiles({ name: "stripes.png", mimeType: "image/png", buffer: Buffer.from(await demoImage("stripes", 5001)) });
    await tab.getByRole("button", { name: "Classify" }).click();
    await expect.poll(() => tab.locator("main").innerText(), { timeout: 30_000 }).toMatch(/Needs review/);
    expect(await tab.locator("main").innerText()).toMatch(/unknown \(none of these\)\s+(0\.[5-9]\d\d|1\.000)/);
    await checkPage("image-decision", tab);

    // The batch tool: two charges more cover two photos, and leave less than the third one's worst case (402).
    expect(await balance()).toBe(WORST + Math.floor(CHARGE / 2) - CHARGE);
    await grant(2 * CHARGE);
    const photos = [
      { name: "circle-1.png", png: await demoImage("circle", 6001) },
      { name: "square-1.png", png: await demoImage("square", 6002) },
      { name: "circle-2.png", png: await demoImage("circle", 6003) },
      { name: "square-2.png", png: await demoImage("square", 6004) },
    ];
    await tab.locator("#photos").setInputFiles(photos.map((p) => ({ name: p.name, mimeType: "image/png", buffer: Buffer.from(p.png) })));
    await tab.getByRole("button", { name: "Start" }).click();
    await expect.poll(() => tab.getByRole("button", { name: "Resume" }).isVisible(), { timeout: 60_000 }).toBe(true);
    const paused = await tab.locator("main").innerText();
    expect(paused).toMatch(/2 of 4 done/);
    const left = ((WORST + Math.floor(CHARGE / 2) - CHARGE) / 1e6).toFixed(6);
    expect(paused).toContain(`Paused: the image credit does not cover the next photo ($${left} available)`);
    await checkPage("image-batch-paused", tab);
    await grant(10 * WORST);
    await tab.getByRole("button", { name: "Resume" }).click();
    await expect.poll(() => tab.locator("main").innerText(), { timeout: 60_000 }).toMatch(/4 of 4 done/);
    const results = await tab.getByRole("table", { name: "Photo results" }).innerText();
    expect(results).toMatch(/circle-1\.png\s+circle/);
    expect(results).toMatch(/square-1\.png\s+square/);
    expect(results).toMatch(/circle-2\.png\s+circle/);
    expect(results).toMatch(/square-2\.png\s+square/);
    // Each photo was decided and charged once: the refused one reserved nothing.
    const [counted] = await query<{ settled: number }>(
      "SELECT count(*)::int AS settled FROM credit_reservations WHERE account_id = (SELECT id FROM accounts WHERE idp_subject = $1) AND status = 'settled'",
      [login],
    );
    expect(counted!.settled).toBe(5);
    await imager.close();
  }, 300_000);

  it("trains an image model from photos picked per answer and for none of these (uploads followed, failures named and retried), follows it to API ready, and uses it in the photo tools", async () => {
    const login = `image-trainer-${process.pid}-${Date.now()}`;
    const { tab, close } = await signedInTab(login);
    // From where a user without an image model looks first.
    await tab.getByRole("link", { name: "Image decisions" }).click();
    await tab.getByRole("link", { name: "train one from your photos" }).click();
    await tab.waitForURL(`${base()}/console/trainings#image-model`);
    await tab.getByLabel("Question", { exact: true }).fill(DEMO_QUESTION_ID);
    await tab.getByLabel("What it asks (optional)").fill(DEMO_QUESTION.instructions);
    await tab.getByLabel("Answer 1", { exact: true }).fill("circle");
    await tab.getByLabel("Answer 2", { exact: true }).fill("square");
    expect(await tab.getByRole("button", { name: "Start training" }).isDisabled()).toBe(true);

    // The first upload's connection drops once (a fault the storage cannot be made to show); one file is no image at all.
    let dropped = false;
    await tab.route("**/*", (route) => {
      if (route.request().method() !== "PUT" || dropped) return route.continue();
      dropped = true;
      return route.abort("connectionreset");
    });
    const drawings = await demoImages(40);
    const files = (label: string | null) => drawings.filter((d) => d.label === label).map((d) => ({ name: `${d.kind}-${d.seed}.png`, mimeType: "image/png", buffer: Buffer.from(d.png) }));
    const broken = { name: "broken.png", mimeType: "image/png", buffer: Buffer.from("this is no image") };
    await tab.getByLabel("Photos of circle", { exact: true }).setInputFiles([...files("circle"), broken]);
    await tab.getByLabel("Photos of square", { exact: true }).setInputFiles(files("square"));
    await tab.getByLabel("Photos of none of these", { exact: true }).setInputFiles(files(null));
    const progress = tab.locator("#image-upload-progress");
    await expect.poll(() => progress.innerText(), { timeout: 120_000 }).toBe("119 of 121 photos uploaded and ready, 2 failed").catch(showing(tab, "image-training-upload"));
    await tab.unrouteAll();
    const failures = await tab.getByRole("alert").innerText();
    expect(failures).toMatch(/2 photos could not be uploaded/);
    expect(failures).toMatch(/circle-\d+\.png: the upload could not reach the storage/);
    expect(failures).toMatch(/broken\.png: .*\(image_unsupported, 422\)/);
    expect(await tab.getByRole("button", { name: "Start training" }).isDisabled()).toBe(true);
    await checkPage("image-training-failures", tab);
    await tab.getByRole("button", { name: "Retry failed photos" }).click();
    await expect.poll(() => progress.innerText(), { timeout: 30_000 }).toBe("120 of 121 photos uploaded and ready, 1 failed");
    await tab.getByRole("button", { name: "Leave them out" }).click();
    expect(await progress.innerText()).toBe("120 of 120 photos uploaded and ready");
    expect(await tab.locator("main").innerText()).toMatch(/40 of 40 ready[\s\S]*40 of 40 ready[\s\S]*40 of 40 ready/);

    // Started, then followed as any training: to API ready, with its report.
    await tab.getByRole("button", { name: "Start training" }).click();
    await expect.poll(() => tab.getByRole("heading", { name: /^Training / }).isVisible(), { timeout: 30_000 }).toBe(true);
    await expect.poll(() => tab.locator("main").innerText(), { timeout: 180_000 }).toMatch(new RegExp(`${READY.source}|rejected|failed`)).catch(showing(tab, "image-training"));
    const detail = await tab.locator("main").innerText();
    expect(detail, detail).toMatch(READY);
    expect(detail).toMatch(/Evaluation on 120 examples/);
    const model = /Model: (\S+)/.exec(detail)![1]!;
    await expect.poll(() => tab.getByRole("table", { name: `Confusion matrix of ${DEMO_QUESTION_ID}` }).innerText()).toMatch(/Answered circle\s+Answered square\s+Answered other/);
    // The form is ready for another model.
    expect(await progress.count()).toBe(0);
    await checkPage("image-training", tab);

    // In the photo tools of the Image decisions page.
    await withDb((db) => grantCredit(db, login, { amountMicroUsd: 10 * WORST, note: "console test" }));
    await tab.getByRole("link", { name: "Use it under Image decisions" }).click();
    await tab.waitForURL(`${base()}/console/images`);
    await expect.poll(() => tab.getByRole("row", { name: /API ready/ }).isVisible()).toBe(true);
    expect(await tab.getByLabel("Image model (API ready)").inputValue()).toBe(model);
    await tab.locator("#photo").setInputFiles({ name: "new-circle.png", mimeType: "image/png", buffer: Buffer.from(await demoImage("circle", 7001)) });
    await tab.getByRole("button", { name: "Classify" }).click();
    await expect.poll(() => tab.locator("main").innerText(), { timeout: 30_000 }).toMatch(/circle\s+confidence \d\.\d{3}/);
    await tab.locator("#photos").setInputFiles([
      { name: "new-square.png", mimeType: "image/png", buffer: Buffer.from(await demoImage("square", 7002)) },
      { name: "new-circle-2.png", mimeType: "image/png", buffer: Buffer.from(await demoImage("circle", 7003)) },
    ]);
    await tab.getByRole("button", { name: "Start" }).click();
    await expect.poll(() => tab.locator("main").innerText(), { timeout: 60_000 }).toMatch(/2 of 2 done/);
    const results = await tab.getByRole("table", { name: "Photo results" }).innerText();
    expect(results).toMatch(/new-square\.png\s+square/);
    expect(results).toMatch(/new-circle-2\.png\s+circle/);
    await close();
  }, 360_000);

  it("shows the account's usage: an empty state, then today's bar with the decisions and batch records made, the totals GET /v1/usage gives, and the key's own row", async () => {
    const login = `usage-${process.pid}-${Date.now()}`;
    const { tab, close } = await signedInTab(login);
    const go = async (title: string) => tab.getByRole("navigation", { name: "Console" }).getByRole("link", { name: title, exact: true }).click();
    await go("Usage");
    await tab.waitForURL(`${base()}/console/usage`);
    await expect.poll(() => tab.getByRole("heading", { name: "No usage yet" }).isVisible()).toBe(true);
    await checkPage("usage-empty", tab);

    const token = remember(await getUserAccessToken({ issuer: stack().issuer, login }));
    const usageOf = async (query = "") => Usage.parse((await call(`/v1/usage${query}`, { token })).body);
    const chart = tab.getByRole("img", { name: /^Requests and batch records per UTC day/ });
    const readout = tab.getByTestId("usage-readout");
    const days = tab.getByRole("table", { name: "Usage per day" });
    const keyRow = tab.getByRole("table", { name: "Usage per API key" }).getByRole("row", { name: /usage key/ });
    /**
     * The page once GET /v1/usage counts what was made (usage rows land a moment after the answers):
     * today's bar, the day table's row, the totals as the API gives them, the key's row.
     */
    const expectShown = async (requests: number, records: number) => {
      await expect.poll(async () => (await usageOf()).totals, { timeout: 15_000 }).toMatchObject({ requests, batch_records: records });
      const api = await usageOf();
      const today = api.end;
      await go("Usage");
      await expect.poll(() => chart.getAttribute("aria-label")).toContain(`from ${api.start} to ${today}: ${requests} requests and ${records} batch records in all, the most on ${today} (${requests + records}); ${today}: ${requests} requests, ${records} batch records.`);
      expect(await readout.innerText()).toMatch(new RegExp(`^${dayName(today)}: ${requests} requests, ${records} batch records, [\\d,]+ input and [\\d,]+ output tokens?$`));
      await tab.getByRole("button", { name: "Show as table" }).click();
      expect(await days.getByRole("row").count()).toBe(USAGE_DAYS + 1);
      expect(await days.getByRole("row").nth(1).innerText()).toMatch(new RegExp(`^${today}\\s+${requests}\\s+${records}\\s`));
      const totals = await tab.getByTestId("usage-totals").innerText();
      for (const [name, value] of [
        ["Requests", count(api.totals.requests)],
        ["Batch records", count(api.totals.batch_records)],
        ["Input tokens", count(api.totals.input_tokens)],
        ["Billable input tokens", count(api.totals.billable_input_tokens)],
        ["Output tokens", count(api.totals.output_tokens)],
        ["Image credit spent", dollars(api.totals.image_credit_micro_usd)],
      ] as const) {
        expect(totals).toMatch(new RegExp(`(^|\\n)${name}\\s+${value.replace("$", "\\$")}(\\n|$)`));
      }
      expect(api.totals.input_tokens).toBeGreaterThan(0);
      // billable_unreported is said only when there are some.
      expect(await tab.getByText(/reported no billable count/).count()).toBe(api.totals.billable_unreported > 0 ? 1 : 0);
      expect(await keyRow.innerText()).toMatch(new RegExp(`^usage key\\s+${keyId}\\s+${requests}\\s+${records}\\s+[\\d,]+\\s+[\\d,]+\\s+\\$0\\.00$`));
      return today;
    };

    // A key, and three decisions with it through the API.
    await go("API keys");
    await tab.getByLabel("New key's name").fill("usage key");
    await tab.getByRole("button", { name: "Create key" }).click();
    const secret = remember((await tab.getByTestId("new-secret").textContent())!.trim());
    const keyId = parseApiKey(secret)!.id;
    await tab.getByRole("button", { name: "Use it in Try a decision" }).click();
    for (let i = 0; i < 3; i++) {
      const reply = await call("/v1/systemone", { token: secret, body: { state: `Ticket ${i}: please refund me`, questions: { refund: { type: "noul", instructions: "Does the customer ask for money back?" } } } });
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
    }
    const today = await expectShown(3, 0);
    // The day in view is today's; the arrow keys move it.
    await chart.focus();
    await tab.keyboard.press("ArrowLeft");
    expect(await readout.innerText()).toBe(`${dayName(addDays(today, -1))}: 0 requests, 0 batch records`);
    await tab.keyboard.press("End");
    expect(await readout.innerText()).toMatch(/: 3 requests, 0 batch records/);

    // A batch of two records from the Batches page: stacked on today's bar.
    await go("Batches");
    const records = ["u-1", "u-2"].map((id) => JSON.stringify({ custom_id: id, body: { model: "svc-shared", state: { ticket: `${id}: thanks` }, questions: { refund: { type: "noul", instructions: "Does the customer ask for money back?" } } } }));
    await tab.locator("#batch-file").setInputFiles({ name: "usage.jsonl", mimeType: "application/jsonl", buffer: Buffer.from(records.join("\n") + "\n") });
    await tab.getByRole("button", { name: "Upload and submit" }).click();
    await expect.poll(() => tab.locator("main").innerText(), { timeout: 90_000 }).toMatch(/2 of 2 records done/).catch(showing(tab, "usage-batch"));
    await expectShown(3, 2);
    await checkPage("usage", tab);

    // The last 7 days: the same day's counts, over a shorter range.
    await tab.getByRole("radio", { name: "Last 7 days" }).click();
    await expect.poll(() => chart.getAttribute("aria-label")).toMatch(new RegExp(`^Requests and batch records per UTC day from ${addDays(today, -6)} to ${today}: 3 requests and 2 batch records`));
    expect(await days.getByRole("row").count()).toBe(7 + 1);
    await checkPage("usage-7-days", tab);
    await close();
  }, 180_000);

  it("creates a key for less than everything: an expiry in the past refused with the API's message, then one until a date, for decisions, for one model, listed so and as GET /v1/keys has it", async () => {
    const login = `limited-${process.pid}-${Date.now()}`;
    const { tab, close } = await signedInTab(login);
    await expect.poll(() => tab.getByRole("heading", { name: "API keys" }).isVisible()).toBe(true);
    await tab.getByLabel("New key's name").fill("limited");
    await tab.getByLabel("Expires (optional)").fill("2020-01-01T00:00");
    await tab.getByRole("button", { name: "Create key" }).click();
    await expect.poll(() => tab.getByRole("alert").innerText()).toMatch(/expires_at must be in the future \(invalid_request, 422\)/);
    expect(await tab.getByTestId("new-secret").count()).toBe(0);

    // The field's local time; the page sends it as RFC 3339 in UTC.
    const local = "2030-06-15T12:30";
    await tab.getByLabel("Expires (optional)").fill(local);
    await tab.getByLabel("May call").selectOption("decisions");
    await tab.getByLabel("Models (optional, comma separated)").fill(" svc-shared, ");
    await tab.getByRole("button", { name: "Create key" }).click();
    const secret = remember((await tab.getByTestId("new-secret").textContent())!.trim());
    expect(await tab.getByRole("alert").count()).toBe(0);
    // The form is ready for the next key: everything again.
    expect(await tab.getByLabel("Expires (optional)").inputValue()).toBe("");
    expect(await tab.getByLabel("May call").inputValue()).toBe("everything");
    const expiresAt = await tab.evaluate<string>(`new Date(${JSON.stringify(local)}).toISOString()`);
    const shownAt = await tab.evaluate<string>(`new Date(${JSON.stringify(expiresAt)}).toLocaleString()`);
    const row = tab.getByRole("row", { name: /limited/ });
    await expect.poll(() => row.innerText()).toContain(shownAt);
    expect(await row.innerText()).toMatch(new RegExp(`^limited\\s+${parseApiKey(secret)!.id}\\s+active\\s+${shownAt.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s+decisions\\s+svc-shared\\s`));
    await checkPage("keys-limited", tab);

    // The API agrees.
    const token = remember(await getUserAccessToken({ issuer: stack().issuer, login }));
    const listed = KeyList.parse((await call("/v1/keys", { token })).body).keys;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ id: parseApiKey(secret)!.id, name: "limited", status: "active", scope: "decisions", models: ["svc-shared"] });
    expect(new Date(listed[0]!.expires_at!).toISOString()).toBe(expiresAt);

    // A key with no limits is listed as such.
    await tab.getByLabel("New key's name").fill("unlimited");
    await tab.getByRole("button", { name: "Create key" }).click();
    remember((await tab.getByTestId("new-secret").textContent())!.trim());
    await expect.poll(() => tab.getByRole("row", { name: /unlimited/ }).innerText()).toMatch(/active\s+never\s+everything\s+any\s/);
    await close();
  });

  it("manages webhook endpoints: one added (refusals shown by the form) with its secret shown once, its delivery of batch.cancelled logged as delivered with 200, the secret rotated and the endpoint deleted after confirmations", async () => {
    const login = `webhooks-${process.pid}-${Date.now()}`;
    const receiver = await startReceiver();
    const { tab, close } = await signedInTab(login);
    try {
      await tab.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Webhooks", exact: true }).click();
      await tab.waitForURL(`${base()}/console/webhooks`);
      await expect.poll(() => tab.getByText("No endpoints yet.").isVisible()).toBe(true);
      await checkPage("webhooks-empty", tab);

      // Plain HTTP to a public host: the API's refusal, next to the form.
      await tab.getByLabel("Endpoint URL").fill("http://example.com/hooks");
      await tab.getByLabel("batch.cancelled").check();
      await tab.getByRole("button", { name: "Add endpoint" }).click();
      await expect.poll(() => tab.getByRole("alert").innerText()).toMatch(/url must use https:\/\/ \(got http:\) \(invalid_request, 422\)/);

      // The receiver on loopback (the local stack allows it), told of cancelled batches.
      await tab.getByLabel("Endpoint URL").fill(receiver.url);
      expect(await tab.getByLabel("batch.cancelled").isChecked()).toBe(true);
      await tab.getByLabel("Description (optional)").fill("console receiver");
      await tab.getByRole("button", { name: "Add endpoint" }).click();
      const secret = remember((await tab.getByTestId("webhook-secret").textContent())!.trim());
      expect(secret).toMatch(WEBHOOK_SECRET_PATTERN);
      expect(await tab.getByRole("status").filter({ hasText: "shown only now" }).innerText()).toContain(`Endpoint ${receiver.url} added.`);
      expect(await tab.getByRole("alert").count()).toBe(0);
      const row = tab.getByRole("row", { name: new RegExp(`^${receiver.url}`) });
      await expect.poll(() => row.innerText()).toMatch(/batch\.cancelled\s+console receiver\s/);
      await checkPage("webhooks-secret", tab);
      await tab.getByRole("button", { name: "Done" }).click();
      expect(await tab.getByTestId("webhook-secret").count()).toBe(0);
      const token = remember(await getUserAccessToken({ issuer: stack().issuer, login }));
      const [endpoint] = (await call<{ data: WebhookEndpoint[] }>("/v1/webhooks", { token })).body.data;
      expect(endpoint).toMatchObject({ url: receiver.url, events: ["batch.cancelled"], description: "console receiver", secret_rotated_at: null });

      // A batch created and cancelled with an API key: its event, sent to the receiver and logged.
      const key = await createKey(token, "webhooks");
      const batch = await call<{ id: string }>("/v1/batches", { token: key.secret, body: { idempotency_key: `console-${randomUUID()}`, input_bytes: 10 } });
      expect(batch.status, JSON.stringify(batch.body)).toBe(201);
      expect((await call<{ status: string }>(`/v1/batches/${batch.body.id}/cancel`, { token: key.secret, body: {} })).body.status).toBe("cancelled");
      await receiver.waitFor(1, (r) => r.body.includes(batch.body.id), 30_000);
      await tab.getByRole("button", { name: `Deliveries to ${receiver.url}`, exact: true }).click();
      const log = tab.getByRole("table", { name: "Deliveries" });
      await expect
        .poll(
          async () => {
            await tab.getByRole("button", { name: "Refresh" }).click();
            return (await log.isVisible()) ? log.getByRole("row").nth(1).innerText() : "";
          },
          { timeout: 30_000 },
        )
        .toMatch(new RegExp(`^batch\\.cancelled\\s+${batch.body.id}\\s+delivered\\s+1\\s+200\\s`))
        .catch(showing(tab, "webhooks-deliveries"));
      expect(await log.getByRole("row").count()).toBe(2);
      const deliveries = WebhookDeliveryList.parse((await call(`/v1/webhooks/${endpoint!.id}/deliveries`, { token })).body);
      expect(deliveries.data).toMatchObject([{ event_type: "batch.cancelled", job_id: batch.body.id, status: "delivered", attempts: 1, last_status_code: 200 }]);
      expect(await tab.getByRole("button", { name: "Load more" }).count()).toBe(0);
      await checkPage("webhooks-deliveries", tab);

      // Rotated after the confirmation: the new secret shown once.
      await tab.getByRole("button", { name: `Rotate secret of ${receiver.url}`, exact: true }).click();
      await expect.poll(() => tab.getByRole("alertdialog").isVisible()).toBe(true);
      await tab.getByRole("alertdialog").getByRole("button", { name: "Rotate secret" }).click();
      await expect.poll(async () => (await tab.getByTestId("webhook-secret").count()) > 0 && (await tab.getByTestId("webhook-secret").textContent())!.trim() !== secret).toBe(true);
      const rotated = remember((await tab.getByTestId("webhook-secret").textContent())!.trim());
      expect(rotated).toMatch(WEBHOOK_SECRET_PATTERN);
      expect(await tab.getByRole("status").filter({ hasText: "shown only now" }).innerText()).toMatch(/rotated: the previous one also signs for 24 hours/);
      expect((await call<WebhookEndpoint>(`/v1/webhooks/${endpoint!.id}`, { token })).body.secret_rotated_at).not.toBeNull();
      await expect.poll(() => row.innerText()).toMatch(/secret rotated/);

      // The account's last place taken (through the API): the form says so.
      const origin = new URL(receiver.url).origin;
      for (let i = 1; i < WEBHOOK_LIMITS.endpoints; i++) {
        const made = await call<{ secret: string }>("/v1/webhooks", { token, body: { url: `${origin}/extra-${i}`, events: ["batch.completed"] } });
        expect(made.status).toBe(201);
        remember(made.body.secret);
      }
      await tab.getByLabel("Endpoint URL").fill(`${origin}/one-too-many`);
      await tab.getByLabel("training.ready").check();
      await tab.getByRole("button", { name: "Add endpoint" }).click();
      await expect.poll(() => tab.getByRole("alert").innerText()).toMatch(/\(webhook_endpoint_limit, 409\)/);

      // Deleted after the confirmation: gone from the list, and from the API.
      await tab.getByRole("button", { name: `Delete ${receiver.url}`, exact: true }).click();
      await expect.poll(() => tab.getByRole("alertdialog").isVisible()).toBe(true);
      await checkPage("webhooks-delete-confirmation", tab);
      await tab.getByRole("alertdialog").getByRole("button", { name: "Delete endpoint" }).click();
      await expect.poll(() => row.count()).toBe(0);
      expect(await tab.getByRole("table", { name: "Deliveries" }).count()).toBe(0);
      expect((await call(`/v1/webhooks/${endpoint!.id}`, { token })).status).toBe(404);
    } finally {
      await close();
      await receiver.close();
    }
  }, 120_000);

  it("works from the keyboard: a skip link first, a key created with Enter, the confirmation focused on Cancel and closed by Escape", async () => {
    const keyboard = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tab = await keyboard.newPage();
    await tab.goto(`${base()}/console/`);
    await signInAt(`keyboard-${process.pid}-${Date.now()}`, tab);
    await expect.poll(() => tab.getByRole("heading", { name: "API keys" }).isVisible()).toBe(true);
    const focused = () => tab.evaluate<string>("document.activeElement?.textContent ?? ''");
    await tab.keyboard.press("Tab");
    await expect.poll(focused).toBe("Skip to content");
    await tab.keyboard.press("Enter");
    // Following the link is the browser's to do after the key press: poll, not read once.
    await expect.poll(() => new URL(tab.url()).hash).toBe("#main");
    await tab.getByLabel("New key's name").focus();
    await tab.keyboard.type("typed");
    await tab.keyboard.press("Enter");
    remember((await tab.getByTestId("new-secret").textContent())!.trim());
    await tab.getByRole("button", { name: "Revoke typed" }).focus();
    await tab.keyboard.press("Enter");
    await expect.poll(() => tab.getByRole("alertdialog").isVisible()).toBe(true);
    // The dialog takes focus in an effect after it is drawn: poll, not read once.
    await expect.poll(focused).toBe("Cancel");
    await tab.keyboard.press("Escape");
    await expect.poll(() => tab.getByRole("alertdialog").isVisible()).toBe(false);
    await expect.poll(() => tab.getByRole("row", { name: /typed/ }).innerText()).toMatch(/active/);
    await keyboard.close();
  });

  it("is usable at phone width: every page fits the screen, the navigation wraps", async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
    const small = await phone.newPage();
    const fits = async (name: string) => {
      await small.screenshot({ path: join(SHOTS, `${name}-phone.png`), fullPage: true });
      expect(await small.evaluate<number>("document.documentElement.scrollWidth"), name).toBeLessThanOrEqual(390);
    };
    await small.goto(`${base()}/console/`);
    await expect.poll(() => small.getByRole("heading", { name: "Sign in" }).isVisible()).toBe(true);
    await fits("sign-in");
    await signInAt(`phone-${process.pid}-${Date.now()}`, small);
    await expect.poll(() => small.getByRole("heading", { name: "API keys" }).isVisible()).toBe(true);
    await small.getByLabel("New key's name").fill("phone");
    await small.getByRole("button", { name: "Create key" }).click();
    remember((await small.getByTestId("new-secret").textContent())!.trim());
    // A key's expiry, scope and models in one column.
    await expect.poll(() => small.getByRole("row", { name: /phone/ }).innerText()).toMatch(/^phone\s+active\s+none\s/);
    await fits("keys");
    await small.getByRole("button", { name: "Use it in Try a decision" }).click();
    await small.getByRole("button", { name: "Decide" }).click();
    await expect.poll(() => small.getByRole("heading", { name: /Answer from/ }).isVisible(), { timeout: 30_000 }).toBe(true);
    await fits("try-a-decision");
    await small.getByRole("link", { name: "Training" }).click();
    await expect.poll(() => small.getByRole("heading", { name: "New image model from your photos" }).isVisible()).toBe(true);
    await fits("training");
    // An endpoint (on loopback, where nobody listens), its secret shown, its empty delivery log open.
    await small.getByRole("link", { name: "Webhooks" }).click();
    await small.getByLabel("Endpoint URL").fill("http://127.0.0.1:9/a-rather-long-path/for-a-phone-screen/hooks");
    await small.getByLabel("batch.completed").check();
    await small.getByRole("button", { name: "Add endpoint" }).click();
    remember((await small.getByTestId("webhook-secret").textContent())!.trim());
    await small.getByRole("button", { name: /^Deliveries to / }).click();
    await expect.poll(() => small.getByText(/No deliveries yet/).isVisible()).toBe(true);
    await fits("webhooks");
    // The decision above shows on Usage a moment after its answer.
    await small.getByRole("link", { name: "Usage" }).click();
    const chart = small.getByRole("img", { name: /^Requests and batch records per UTC day/ });
    await expect
      .poll(async () => {
        if (await small.getByRole("heading", { name: "No usage yet" }).isVisible()) await small.getByRole("button", { name: "Refresh" }).click();
        return chart.isVisible();
      })
      .toBe(true);
    await small.getByRole("button", { name: "Show as table" }).click();
    await fits("usage");
    await phone.close();
  });
});

describe("the Usage page's arithmetic", () => {
  it("draws counts on whole steps of 1, 2 or 5 times a power of ten that reach the largest", () => {
    expect(countTicks(0)).toEqual([0, 1]);
    expect(countTicks(1)).toEqual([0, 1]);
    expect(countTicks(3)).toEqual([0, 1, 2, 3]);
    expect(countTicks(7)).toEqual([0, 2, 4, 6, 8]);
    expect(countTicks(1234)).toEqual([0, 500, 1000, 1500]);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000_000 }), (max) => {
        const ticks = countTicks(max);
        const step = ticks[1]!;
        expect(ticks.at(-1)).toBeGreaterThanOrEqual(max);
        expect(ticks.at(-2)).toBeLessThan(max);
        expect(ticks.length).toBeLessThanOrEqual(6);
        expect(Number.isInteger(step) && /^[125]0*$/.test(String(step))).toBe(true);
      }),
    );
  });

  it("labels days far enough apart not to overlap, and writes days and dollars as the page shows them", () => {
    expect(labelEvery(7, 140)).toBe(1);
    expect(labelEvery(30, 33)).toBe(2);
    expect(labelEvery(30, 10)).toBe(5);
    expect(labelEvery(30, 1)).toBe(30);
    fc.assert(
      fc.property(fc.double({ min: 0.5, max: 200, noNaN: true }), (band) => {
        const every = labelEvery(USAGE_DAYS, band);
        expect(every * band >= 48 || every === USAGE_DAYS).toBe(true);
      }),
    );
    expect(addDays("2026-03-01", -1)).toBe("2026-02-28");
    expect(addDays("2026-12-31", 1)).toBe("2027-01-01");
    expect(dayName("2026-11-27")).toBe("Fri, Nov 27");
    expect(dollars(0)).toBe("$0.00");
    expect(dollars(1_234)).toBe("$0.001234");
    expect(dollars(12_500_000)).toBe("$12.50");
    expect(count(1234567)).toBe("1,234,567");
    expect(plural(1, "batch record")).toBe("1 batch record");
    expect(plural(1200, "request")).toBe("1,200 requests");
  });
});

describe("the image training file the console writes", () => {
  const images = (counts: [number | null, number][]): PickedImage[] =>
    counts.flatMap(([answer, n]) => Array.from({ length: n }, (_, i) => ({ answer, filename: `${answer ?? "none"}-${i}.png`, stage: "ready" as const, assetId: randomUUID() })));
  const task = { question: "digit", instructions: "", answers: ["10", "2", "seven"] };
  const least = LIMITS.trainingExamplesPerOutcome;

  it("is one the service's validator accepts: one line per ready image, an answer's name or null as its label, the answers in their order", () => {
    const picked = images([[0, least], [1, least], [2, least], [null, least]]);
    const file = imageTrainingFile(task, [...picked, { answer: 0, filename: "late.png", stage: "uploading", assetId: null }]);
    const checked = validateTrainingFile(new TextEncoder().encode(file));
    if (!checked.ok) throw new Error(checked.error.message);
    expect(checked.task).toMatchObject({ model: IMAGE_BASE_ALIAS, modality: "image" });
    // Integer-like names keep their place (a plain object would move them first).
    expect([...(checked.task.questions.get("digit") as { criteria: Map<string, null> }).criteria.keys()]).toEqual(["10", "2", "seven"]);
    expect(checked.examples).toHaveLength(4 * least);
    expect(checked.examples.map((e) => e.assetId)).toEqual(picked.map((p) => p.assetId));
    // Outcome indexes: the answers in order, then "other" (none of these) after them.
    expect(checked.examples.at(-1)!.outcomes).toEqual([3]);
    expect(file.split("\n")[0]).toContain('"labels":{"digit":"10"}');
    expect(file.trimEnd().split("\n").at(-1)).toContain('"labels":{"digit":null}');
  });

  it("says what is missing before a training can start, with the contract's limits", () => {
    const enough = images([[0, least], [1, least], [2, least], [null, least]]);
    expect(missingForTraining(task, enough)).toBeNull();
    expect(missingForTraining({ ...task, question: " " }, enough)).toMatch(/Name the question/);
    expect(missingForTraining({ ...task, answers: ["only"] }, enough)).toBe(`A question has ${LIMITS.imageOutcomes.min} to ${LIMITS.imageOutcomes.max} answers.`);
    expect(missingForTraining({ ...task, answers: ["a", "b", ""] }, enough)).toBe("Name answer 3.");
    expect(missingForTraining({ ...task, answers: ["a", "b", "a "] }, enough)).toMatch(/Two answers are named a/);
    expect(missingForTraining(task, enough.slice(1))).toBe(`10 needs at least ${least} photos (${least - 1} ready).`);
    expect(missingForTraining(task, enough.slice(0, -1))).toBe(`None of these needs at least ${least} photos (${least - 1} ready).`);
    expect(missingForTraining(task, [...enough, { answer: 1, filename: "x.png", stage: "finalizing", assetId: null }])).toBe("1 photo is still uploading.");
    expect(missingForTraining(task, [...enough, { answer: 1, filename: "x.png", stage: "failed", assetId: null }])).toMatch(/could not be uploaded/);
  });
});
