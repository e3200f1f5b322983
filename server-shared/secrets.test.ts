import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { sharedSecret } from "./http.ts";
import { parseSecretList } from "./secret-list.ts";
import { SecretSource } from "./secrets.ts";

describe("secret rotation lists", () => {
  it("send the first and accept every one", () => {
    expect(parseSecretList("new")).toEqual({ send: "new", accepted: ["new"] });
    expect(parseSecretList(" new , old\n")).toEqual({ send: "new", accepted: ["new", "old"] });
    for (const bad of ["", ",", "new,", ",old", "a,,b"]) expect(() => parseSecretList(bad)).toThrow(/empty/);
  });

  it("are checked at the gate: any accepted secret passes, nothing else does", async () => {
    let accepted: readonly string[] = ["old"];
    const app = new Hono();
    app.use("*", sharedSecret(() => accepted, "sidecar"));
    app.get("/", (c) => c.text("ok"));
    const status = async (secret: string) => (await app.request("/", { headers: { authorization: `Bearer ${secret}` } })).status;
    expect([await status("old"), await status("new")]).toEqual([200, 401]);
    accepted = ["new", "old"];
    expect([await status("old"), await status("new")]).toEqual([200, 200]);
    accepted = ["new"];
    expect([await status("old"), await status("new"), await status("new,old"), await status("")]).toEqual([401, 200, 401, 401]);
    expect(() => sharedSecret(() => [], "sidecar")).toThrow(/must not be empty/);
  });
});

describe("SecretSource", () => {
  it("reads NAME, or the file NAME_FILE names, and reads files again only when told", () => {
    const dir = mkdtempSync(join(tmpdir(), "secrets-"));
    try {
      const file = join(dir, "sidecar");
      writeFileSync(file, "old\n", { mode: 0o600 });
      const secrets = new SecretSource({ DIRECT: "a,b", SIDECAR_SECRET_FILE: file });
      expect(secrets.list("DIRECT")).toEqual({ send: "a", accepted: ["a", "b"] });
      expect(secrets.list("SIDECAR_SECRET")).toEqual({ send: "old", accepted: ["old"] });
      expect(secrets.list("UNSET")).toBeUndefined();

      writeFileSync(file, "new,old\n");
      expect(secrets.list("SIDECAR_SECRET")?.send).toBe("old");
      expect(secrets.reload()).toEqual([]);
      expect(secrets.list("SIDECAR_SECRET")).toEqual({ send: "new", accepted: ["new", "old"] });

      // A file that cannot be read now keeps the previous value, and says so.
      rmSync(file);
      expect(secrets.reload()).toEqual(["SIDECAR_SECRET"]);
      expect(secrets.list("SIDECAR_SECRET")?.send).toBe("new");
      writeFileSync(file, "");
      expect(secrets.reload()).toEqual(["SIDECAR_SECRET"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses both forms at once and names an unreadable file by setting, never its content", () => {
    expect(() => new SecretSource({ S: "x", S_FILE: "/etc/hostname" }).list("S")).toThrow("setting S and S_FILE are both set; set one");
    expect(() => new SecretSource({ S_FILE: "/nonexistent/secret" }).list("S")).toThrow("setting S_FILE: cannot read /nonexistent/secret: ENOENT");
  });
});
