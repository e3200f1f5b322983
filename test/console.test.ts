/**
 * The web console in a real browser: Debian's Chromium, headless, driven by playwright-core against
 * the shared stack (its edge serves /console from the Worker's assets; its identity provider is the
 * local OpenID provider). Each page is screenshotted under .local/console-screenshots/ and checked
 * with axe-core (no serious or critical violation), with the page's Content Security Policy in force:
 * a violation the browser reports fails the test.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createRequire } from "node:module";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, remember, stack } from "./support/api.ts";
import { chromiumPath } from "./support/chromium.ts";

const ROOT = resolve(import.meta.dirname, "..");
const SHOTS = join(ROOT, ".local", "console-screenshots");
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

let browser: Browser;
let context: BrowserContext;
let page: Page;
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
async function accessibilityViolations(): Promise<string[]> {
  await page.evaluate(AXE);
  const result = (await page.evaluate(() => (globalThis as unknown as { axe: { run(): Promise<unknown> } }).axe.run())) as {
    violations: { id: string; impact: string | null; help: string; nodes: { target: unknown }[] }[];
  };
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help}: ${JSON.stringify(v.nodes.slice(0, 3).map((n) => n.target))}`);
}

/** A screenshot of the page under .local/console-screenshots, and its accessibility check. */
async function checkPage(name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  expect(await accessibilityViolations(), `axe on ${name}`).toEqual([]);
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
    const config = (await (await fetch(`${base()}/console/config.json`)).json()) as { issuer: string; client_id: string };
    expect(config).toMatchObject({ issuer: stack().issuer, client_id: "svc-console", scope: "openid keys", images: { api: true, browser: true } });
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
    expect(await page.getByLabel("API key").inputValue()).toBe(secret);
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
    await page.getByLabel(/Options/).fill("billing, support, engineering");
    await page.getByRole("button", { name: "Add question" }).click();
    expect(JSON.parse(await page.getByLabel("Questions (JSON)").inputValue())).toMatchObject({ team: { type: "choice", criteria: { billing: null, support: null, engineering: null } } });
    await page.getByRole("button", { name: "Decide" }).click();
    await expect.poll(() => page.getByRole("heading", { name: "team" }).isVisible(), { timeout: 30_000 }).toBe(true);
    expect(await page.locator("main").innerText()).toMatch(/billing\s+0\.\d{3}[\s\S]*support\s+0\.\d{3}[\s\S]*engineering\s+0\.\d{3}/);

    // Models, with the same key in memory.
    await page.getByRole("link", { name: "Models" }).click();
    await page.getByRole("button", { name: "List models" }).click();
    await expect.poll(() => page.getByRole("row", { name: /svc-shared/ }).isVisible()).toBe(true);
    await checkPage("models");

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
    await fits("keys");
    await small.getByRole("button", { name: "Use it in Try a decision" }).click();
    await small.getByRole("button", { name: "Decide" }).click();
    await expect.poll(() => small.getByRole("heading", { name: /Answer from/ }).isVisible(), { timeout: 30_000 }).toBe(true);
    await fits("try-a-decision");
    await phone.close();
  });
});
