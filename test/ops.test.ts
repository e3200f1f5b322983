/** The operator commands as an operator runs them (`npm run registry`, `npm run account`), on the shared stack's database. */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../local/tiers.ts";
import { migrate } from "../ops/migrate.ts";
import { call, newAccount, query, stack } from "./support/api.ts";
import { expectError } from "./support/security.ts";

function run(script: string, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(join(ROOT, "node_modules/.bin/bun"), [join(ROOT, script), ...args], {
    env: { ...process.env, DATABASE_URL: stack().databaseUrl },
    encoding: "utf8",
    timeout: 30_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("npm run db:migrate", () => {
  it("finds a live database at the latest version, also run concurrently, in one transaction that leaves no session state", async () => {
    const before = await query("SELECT count(*)::int AS n FROM information_schema.columns WHERE table_schema = 'public'");
    const runs = await Promise.all([migrate(stack().databaseUrl), migrate(stack().databaseUrl), migrate(stack().databaseUrl)]);
    for (const run of runs) expect(run.from).toBe(run.to);
    expect(await query("SELECT count(*)::int AS n FROM information_schema.columns WHERE table_schema = 'public'")).toEqual(before);
    // A transaction-scoped lock: none is left behind for a pooled server connection's next user.
    expect(await query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'")).toEqual([{ n: 0 }]);
  });
});

describe("npm run registry", () => {
  it("adds a release, points an alias at it, lists it, and retires it", async () => {
    const id = `ops-${crypto.randomUUID().slice(0, 8)}`;
    expect(run("ops/registry.ts", "add", id, "--fingerprint", "f".repeat(64), "--url", "https://gpu.example.test", "--token-env", "GPU_SECRET", "--description", "from ops").status).toBe(0);
    expect(run("ops/registry.ts", "alias", `${id}-latest`, id).status).toBe(0);
    const listed = JSON.parse(run("ops/registry.ts", "list").stdout) as Array<{ id: string; aliases: string[] }>;
    expect(listed.find((r) => r.id === id)?.aliases).toEqual([`${id}-latest`]);
    expect(run("ops/registry.ts", "retire", id).status).toBe(0);
    expect((await query("SELECT retired_at FROM model_releases WHERE id = $1", [id]))[0]?.retired_at).not.toBeNull();
  });

  it("moves the models trained on a release with it when it is added again at another address", async () => {
    const id = `ops-${crypto.randomUUID().slice(0, 8)}`;
    const add = (url: string, tokenEnv: string) => run("ops/registry.ts", "add", id, "--fingerprint", "f".repeat(64), "--url", url, "--token-env", tokenEnv).status;
    expect(add("https://gpu-a.example.test", "GPU_SECRET")).toBe(0);
    // A model trained on it (its own row, as activation writes it), and a release merely based on it, untrained.
    await query(
      `INSERT INTO model_releases (id, fingerprint, url, token_env, release_date, base_release, training_id)
       VALUES ($1 || '-trained', repeat('a', 64), 'https://gpu-a.example.test', 'GPU_SECRET', current_date, $1, gen_random_uuid()),
              ($1 || '-variant', repeat('b', 64), 'https://gpu-a.example.test', 'GPU_SECRET', current_date, $1, NULL)`,
      [id],
    );
    expect(add("https://gpu-b.example.test", "GPU_B_SECRET")).toBe(0);
    const rows = await query<{ id: string; url: string; token_env: string }>("SELECT id, url, token_env FROM model_releases WHERE id LIKE $1 ORDER BY id", [`${id}%`]);
    expect(rows).toEqual([
      { id, url: "https://gpu-b.example.test", token_env: "GPU_B_SECRET" },
      { id: `${id}-trained`, url: "https://gpu-b.example.test", token_env: "GPU_B_SECRET" },
      { id: `${id}-variant`, url: "https://gpu-a.example.test", token_env: "GPU_SECRET" },
    ]);
    await query("UPDATE model_releases SET retired_at = now() WHERE id LIKE $1", [`${id}%`]);
  });

  it("refuses a remote plaintext runtime URL, a changed fingerprint, and an alias to a retired release", () => {
    const id = `ops-${crypto.randomUUID().slice(0, 8)}`;
    const plain = run("ops/registry.ts", "add", id, "--fingerprint", "f".repeat(64), "--url", "http://gpu.example.test", "--token-env", "GPU_SECRET");
    expect(plain.status).toBe(2);
    expect(plain.stderr).toMatch(/plaintext/);
    expect(run("ops/registry.ts", "add", id, "--fingerprint", "f".repeat(64), "--url", "https://gpu.example.test", "--token-env", "GPU_SECRET").status).toBe(0);
    const changed = run("ops/registry.ts", "add", id, "--fingerprint", "0".repeat(64), "--url", "https://gpu.example.test", "--token-env", "GPU_SECRET");
    expect(changed.status).toBe(2);
    expect(changed.stderr).toMatch(/immutable/);
    run("ops/registry.ts", "retire", id);
    expect(run("ops/registry.ts", "alias", `${id}-x`, id).stderr).toMatch(/no serving release/);
  });
});

describe("npm run account", () => {
  it("sets quotas, disables and enables an account by its subject, applying on the next request", async () => {
    const account = await newAccount();
    const set = run("ops/accounts.ts", "set", account.login, "--requests-per-second", "7", "--tokens-per-second", "none");
    expect(set.status).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ id: account.accountId, requests_per_second: 7, tokens_per_second: null, status: "active" });
    expect(run("ops/accounts.ts", "disable", account.login).status).toBe(0);
    expectError(await call("/v1/models", { token: account.key.secret }), 401, "account_disabled");
    expect(run("ops/accounts.ts", "enable", account.accountId).status).toBe(0);
    expect((await call("/v1/models", { token: account.key.secret })).status).toBe(200);
  });

  it("says what is wrong with bad arguments or an unknown account, exiting 2", () => {
    expect(run("ops/accounts.ts", "set", "nobody-at-all", "--requests-per-second", "1").stderr).toMatch(/no account nobody-at-all/);
    const bad = run("ops/accounts.ts", "set", "x", "--requests-per-second", "0");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/positive integer or none/);
  });
});
