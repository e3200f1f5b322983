import { describe, expect, it } from "vitest";
import { newWebhookSecret, signWebhook, verifyWebhook } from "./webhook-signature.ts";
import { checkWebhookUrl, isPublicAddress, jobEvents, WEBHOOK_EVENTS, WEBHOOK_SECRET_PATTERN } from "./webhooks.ts";

// The Standard Webhooks specification's published test vector: matching it is what lets a receiver
// check this service's deliveries with any of that specification's libraries.
const VECTOR = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};
const vectorHeaders = (signature = VECTOR.signature, timestamp = String(VECTOR.timestamp)) =>
  new Headers({ "webhook-id": VECTOR.id, "webhook-timestamp": timestamp, "webhook-signature": signature });
const AT = { now: new Date(VECTOR.timestamp * 1000) };

describe("Standard Webhooks signatures", () => {
  it("reproduces the specification's test vector, and verifies it", async () => {
    expect(await signWebhook([VECTOR.secret], VECTOR.id, VECTOR.timestamp, VECTOR.body)).toBe(VECTOR.signature);
    expect(await verifyWebhook(VECTOR.body, vectorHeaders(), VECTOR.secret, AT)).toEqual({ test: 2432232314 });
    // A secret pasted without its prefix is the same key.
    expect(await verifyWebhook(VECTOR.body, vectorHeaders(), VECTOR.secret.slice("whsec_".length), AT)).toEqual({ test: 2432232314 });
  });

  it("signs with every secret given, and a receiver with any one of them verifies", async () => {
    const [a, b] = [newWebhookSecret(), newWebhookSecret()];
    expect(a).toMatch(WEBHOOK_SECRET_PATTERN);
    expect(a).not.toBe(b);
    const header = await signWebhook([a, b], "evt_1", VECTOR.timestamp, VECTOR.body);
    expect(header.split(" ")).toHaveLength(2);
    for (const secret of [a, b]) await verifyWebhook(VECTOR.body, { "Webhook-Id": "evt_1", "webhook-timestamp": String(VECTOR.timestamp), "webhook-signature": header }, secret, AT);
    await expect(verifyWebhook(VECTOR.body, vectorHeaders(header), newWebhookSecret(), AT)).rejects.toThrow(/no signature matches/);
  });

  it("refuses an altered body, id or timestamp, a replay outside the tolerance, missing headers and other versions", async () => {
    const refuse = (body: string, headers: Headers, opts = AT) => expect(verifyWebhook(body, headers, VECTOR.secret, opts)).rejects.toThrow();
    await refuse('{"test": 2432232315}', vectorHeaders());
    await refuse(VECTOR.body, new Headers({ "webhook-id": "msg_other", "webhook-timestamp": String(VECTOR.timestamp), "webhook-signature": VECTOR.signature }));
    await refuse(VECTOR.body, vectorHeaders(VECTOR.signature, String(VECTOR.timestamp + 1)));
    await refuse(VECTOR.body, vectorHeaders(), { now: new Date((VECTOR.timestamp + 301) * 1000) });
    await refuse(VECTOR.body, vectorHeaders(), { now: new Date((VECTOR.timestamp - 301) * 1000) });
    await refuse(VECTOR.body, new Headers({ "webhook-id": VECTOR.id, "webhook-timestamp": String(VECTOR.timestamp) }));
    await refuse(VECTOR.body, vectorHeaders(VECTOR.signature.replace("v1,", "v2,")));
    await refuse(VECTOR.body, vectorHeaders(VECTOR.signature, "1614265330.5"));
    // Within the tolerance, it passes.
    expect(await verifyWebhook(VECTOR.body, vectorHeaders(), VECTOR.secret, { now: new Date((VECTOR.timestamp + 299) * 1000) })).toBeTruthy();
  });
});

describe("where an endpoint may point", () => {
  it("names every terminal status of both kinds of job as an event, as the outbox trigger writes them", () => {
    expect([...WEBHOOK_EVENTS]).toEqual(jobEvents());
    expect(WEBHOOK_EVENTS).toEqual([
      "batch.completed", "batch.failed", "batch.cancelled", "batch.expired",
      "training.ready", "training.rejected", "training.failed", "training.cancelled", "training.expired",
    ]);
  });

  it("takes only public HTTPS in production", () => {
    const production = { privateTargets: false };
    expect(checkWebhookUrl("https://hooks.example.com/in?x=1", production)).toMatchObject({ url: expect.any(URL) });
    expect(checkWebhookUrl("https://93.184.215.14/in", production)).toMatchObject({ url: expect.any(URL) });
    expect(checkWebhookUrl("https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/in", production)).toMatchObject({ url: expect.any(URL) });
    for (const refused of [
      "http://hooks.example.com/", "http://127.0.0.1:8080/", "https://127.0.0.1/", "https://localhost/", "https://a.localhost/",
      "https://10.0.0.5/", "https://172.16.3.4/", "https://192.168.1.1/", "https://169.254.169.254/latest/meta-data", "https://100.64.0.1/",
      "https://0.0.0.0/", "https://[::1]/", "https://[fd00::1]/", "https://[fe80::1]/", "https://[::ffff:10.0.0.1]/", "https://[::ffff:7f00:1]/",
      "https://0x7f.0.0.1/", "https://2130706433/", "https://printer.local/", "https://metadata.google.internal/", "https://intranet/",
      "https://user:pw@hooks.example.com/", "ftp://hooks.example.com/", "not a url",
    ]) {
      expect(checkWebhookUrl(refused, production), refused).toHaveProperty("error");
    }
  });

  it("lets a local stack use loopback receivers, plain HTTP only there", () => {
    const local = { privateTargets: true };
    expect(checkWebhookUrl("http://127.0.0.1:4000/hooks", local)).toHaveProperty("url");
    expect(checkWebhookUrl("http://localhost:4000/hooks", local)).toHaveProperty("url");
    expect(checkWebhookUrl("https://10.0.0.5/hooks", local)).toHaveProperty("url");
    expect(checkWebhookUrl("http://10.0.0.5/hooks", local)).toHaveProperty("error");
    expect(checkWebhookUrl("http://hooks.example.com/", local)).toHaveProperty("error");
  });

  it("tells public addresses from the others, IPv4 and IPv6", () => {
    for (const address of ["8.8.8.8", "93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808"]) {
      expect(isPublicAddress(address), address).toBe(true);
    }
    for (const address of [
      "127.0.0.1", "127.255.0.9", "10.1.2.3", "172.31.255.255", "192.168.0.1", "169.254.169.254", "100.100.100.100", "0.0.0.0", "255.255.255.255",
      "224.0.0.1", "198.18.0.1", "192.0.2.7", "::", "::1", "fc00::1", "fd12:3456::1", "fe80::1%eth0", "ff02::1", "::ffff:127.0.0.1", "::ffff:c0a8:101",
      "64:ff9b::a00:1", "2001:db8::1", "2002:a00:1::1", "::127.0.0.1", "not an address", "1.2.3", "1.2.3.256", "1::2::3",
    ]) {
      expect(isPublicAddress(address), address).toBe(false);
    }
  });
});
