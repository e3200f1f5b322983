/** GET /v1/models through the real Worker with API keys (the first API-key route). */
import { beforeAll, describe, expect, it } from "vitest";
import { ModelList } from "../contract/models.ts";
import { SHARED_ALIAS } from "../contract/limits.ts";
import { call, newAccount, query, stack } from "./support/api.ts";
import { apiKeyRouteSecurity } from "./support/security.ts";

let account: Awaited<ReturnType<typeof newAccount>>;

beforeAll(async () => {
  account = await newAccount();
});

describe("GET /v1/models", () => {
  it("lists the shared release under its alias, without addresses or secret names", async () => {
    const reply = await call("/v1/models", { token: account.key.secret });
    expect(reply.status).toBe(200);
    const { models } = ModelList.parse(reply.body);
    expect(models).toContainEqual(expect.objectContaining({ name: stack().releaseId, aliases: [SHARED_ALIAS] }));
    const text = JSON.stringify(reply.body);
    expect(text).not.toContain("127.0.0.1");
    expect(text).not.toContain("SVC_RUNTIME_SECRET");
  });

  it("shows a release owned by the account only to that account, and never a retired one", async () => {
    const other = await newAccount();
    const fingerprint = "a".repeat(64);
    await query(
      `INSERT INTO model_releases (id, fingerprint, owners, url, token_env, release_date, description)
       VALUES ($1, $2, $3, 'https://gpu.example.test', 'SVC_RUNTIME_SECRET', '2026-11-01', 'private'),
              ($4, $2, NULL, 'https://gpu.example.test', 'SVC_RUNTIME_SECRET', '2026-11-01', 'retired')`,
      [`private-${account.accountId}`, fingerprint, [account.accountId], `retired-${account.accountId}`],
    );
    await query("UPDATE model_releases SET retired_at = now() WHERE id = $1", [`retired-${account.accountId}`]);
    const mine = ModelList.parse((await call("/v1/models", { token: account.key.secret })).body).models.map((m) => m.name);
    const theirs = ModelList.parse((await call("/v1/models", { token: other.key.secret })).body).models.map((m) => m.name);
    expect(mine).toContain(`private-${account.accountId}`);
    expect(theirs).not.toContain(`private-${account.accountId}`);
    expect([...mine, ...theirs]).not.toContain(`retired-${account.accountId}`);
  });

  apiKeyRouteSecurity({ method: "GET", path: "/v1/models" });
});
