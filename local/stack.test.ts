import { describe, expect, it } from "vitest";
import { neonRoute } from "../server-shared/neon-route.ts";
import { databaseSettings, localDatabase } from "./stack.ts";

describe("the launcher's database settings for the edge and the sidecar", () => {
  it("hand a remote DATABASE_URL (Neon) over as it is, with no local bridge, so the tiers use Neon's own endpoints", () => {
    const neon = "postgres://app:pw@ep-quiet-lake-123456.us-east-2.aws.neon.tech/svc?sslmode=require";
    expect(localDatabase(neon)).toBe(false);
    // Even when a bridge is running for some other reason, a remote database never goes through it.
    expect(databaseSettings(neon, "127.0.0.1:6543")).toEqual({ DATABASE_URL: neon });
    expect(databaseSettings(neon, null)).toEqual({ DATABASE_URL: neon });
    expect(neonRoute(neon, databaseSettings(neon, "127.0.0.1:6543").NEON_LOCAL_BRIDGE)).toEqual({ via: "neon" });
  });

  it("route a loopback Postgres (the embedded one, or the machine's) through the local Neon bridge", () => {
    for (const local of ["postgres://postgres:pw@127.0.0.1:5432/svc", "postgres://u@localhost/svc", "postgres://u@[::1]:5433/svc", "postgres:///svc?host=/var/run/postgresql"]) {
      expect(localDatabase(local)).toBe(true);
      const settings = databaseSettings(local, "127.0.0.1:6543");
      expect(settings).toEqual({ DATABASE_URL: local, NEON_LOCAL_BRIDGE: "127.0.0.1:6543" });
      expect(neonRoute(settings.DATABASE_URL, settings.NEON_LOCAL_BRIDGE)).toEqual({ via: "bridge", bridge: "127.0.0.1:6543" });
    }
    expect(() => databaseSettings("postgres://u@127.0.0.1/svc", null)).toThrow(/needs the local Neon bridge/);
  });
});
