/**
 * Sealing webhook secrets (server-shared/webhook-secrets.ts) with WebCrypto as Node has it; the edge
 * (workerd) and the sidecar (Bun) seal and open the same way on the real stack
 * (test/webhook-secrets.test.ts).
 */
import { describe, expect, it } from "vitest";
import { newWebhookSecret } from "../contract/webhook-signature.ts";
import { parseSecretList } from "./secret-list.ts";
import { UnreadableWebhookSecret, webhookKeyProblem, webhookKeyring } from "./webhook-secrets.ts";

const newKey = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64");
const keys = (...list: string[]) => webhookKeyring(parseSecretList(list.join(",")));
const endpoint = () => crypto.randomUUID();

describe("a sealed webhook secret", () => {
  it("names its key, holds neither the secret nor its key bytes, differs each time, and opens to the secret", async () => {
    const key = newKey();
    const ring = await keys(key);
    const [id, secret] = [endpoint(), newWebhookSecret()];
    const sealed = await ring.seal(id, secret);
    expect(sealed).toMatch(new RegExp(`^aesgcm1:${ring.currentId}:[A-Za-z0-9_-]+$`));
    expect(ring.currentId).toMatch(/^[0-9a-f]{12}$/);
    expect(sealed.startsWith(ring.sealedPrefix)).toBe(true);
    for (const part of [secret, secret.slice("whsec_".length), key]) expect(sealed).not.toContain(part);
    expect(await ring.seal(id, secret)).not.toBe(sealed);
    expect(await ring.open(id, sealed)).toBe(secret);
  });

  it("opens only for its own endpoint, and not once altered", async () => {
    const ring = await keys(newKey());
    const id = endpoint();
    const sealed = await ring.seal(id, newWebhookSecret());
    await expect(ring.open(endpoint(), sealed)).rejects.toThrow(UnreadableWebhookSecret);
    const last = sealed.at(-2) === "A" ? "B" : "A";
    await expect(ring.open(id, `${sealed.slice(0, -2)}${last}${sealed.at(-1)}`)).rejects.toThrow(/does not open under key/);
    await expect(ring.open(id, "aesgcm1:nope")).rejects.toThrow(/no form/);
    await expect(ring.open(id, "")).rejects.toThrow(UnreadableWebhookSecret);
  });

  it("through a key rotation: the new key seals, the old one still opens; once dropped, the error names the key id only", async () => {
    const [oldKey, newer] = [newKey(), newKey()];
    const before = await keys(oldKey);
    const id = endpoint();
    const secret = newWebhookSecret();
    const underOld = await before.seal(id, secret);

    const rotating = await keys(newer, oldKey);
    expect(rotating.currentId).not.toBe(before.currentId);
    expect(await rotating.open(id, underOld)).toBe(secret);
    const underNew = await rotating.seal(id, secret);
    expect(underNew.startsWith(`aesgcm1:${rotating.currentId}:`)).toBe(true);
    expect(await (await keys(newer)).open(id, underNew)).toBe(secret);

    const error = await (await keys(newer)).open(id, underOld).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(UnreadableWebhookSecret);
    expect((error as Error).message).toBe(`is sealed under key ${before.currentId}, which WEBHOOK_SECRET_KEY does not hold`);
  });

  it("gives a secret still in the plain form of before as it is, for the sidecar to seal", async () => {
    const secret = newWebhookSecret();
    expect(await (await keys(newKey())).open(endpoint(), secret)).toBe(secret);
  });
});

describe("WEBHOOK_SECRET_KEY", () => {
  it("takes keys of 32 bytes in base64 or base64url, padded or not", () => {
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    const forms = [Buffer.from(bytes).toString("base64"), Buffer.from(bytes).toString("base64url"), Buffer.from(bytes).toString("base64").replace(/=+$/, "")];
    for (const form of forms) expect(webhookKeyProblem(parseSecretList(form))).toBeNull();
  });

  it("refuses an entry that is not such a key, naming its place and never its value", async () => {
    const good = newKey();
    for (const bad of ["too-short", Buffer.from(new Uint8Array(16)).toString("base64"), Buffer.from(new Uint8Array(33)).toString("base64"), `${good.slice(0, -2)}!=`]) {
      const problem = webhookKeyProblem(parseSecretList(`${good},${bad}`));
      expect(problem).toMatch(/^entry 2 of its comma-separated list is not the base64 of 32 bytes/);
      expect(problem).not.toContain(bad);
      await expect(keys(good, bad)).rejects.toThrow(/setting WEBHOOK_SECRET_KEY: entry 2/);
    }
  });
});
