/**
 * Imports run one way: local launcher -> operator commands -> server-shared -> contract, and each
 * server tier (edge, sidecar, runtime) sees only server-shared and the contract. The contract is what
 * clients import, so it imports nothing but zod and itself. Tests and benchmarks may import anything.
 */
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../local/tiers.ts";

/** Folder -> the project folders its modules may import from. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  contract: ["contract"],
  "server-shared": ["server-shared", "contract"],
  edge: ["edge", "server-shared", "contract"],
  sidecar: ["sidecar", "server-shared", "contract"],
  runtime: ["runtime", "server-shared", "contract"],
  // ops/calibrate.ts runs the sidecar's readout on a runtime to fit a release's calibration;
  // ops/smoke.ts calls a deployment as a customer would, through the TypeScript SDK.
  // ops/engine-build.ts builds the runtime's engine and finds the build as the runtime does.
  ops: ["ops", "sidecar", "runtime", "server-shared", "contract", "clients"],
  local: ["local", "ops", "server-shared", "contract"],
  clients: ["clients", "contract"],
};
/** Packages a folder may import; absent means any. The public contract depends on zod alone. */
const PACKAGES: Record<string, (name: string) => boolean> = {
  contract: (name) => name === "zod" || name.startsWith("zod/"),
  clients: (name) => !name.startsWith("@neondatabase/") && !name.startsWith("@upstash/") && name !== "pg",
};

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["']([^"']+)["']/g;

/** The imports of one source file that break the rules, as "file -> specifier (why)". */
export function violations(file: string, source: string): string[] {
  const top = file.split("/")[0]!;
  const allowed = MAY_IMPORT[top];
  if (!allowed || isTest(file)) return [];
  const found: string[] = [];
  for (const [, specifier] of source.matchAll(SPECIFIER)) {
    if (specifier!.startsWith(".")) {
      const target = normalize(join(dirname(file), specifier!)).split("/")[0]!;
      if (!allowed.includes(target)) found.push(`${file} -> ${specifier} (${top} may import ${allowed.join(", ")})`);
    } else if (!specifier!.startsWith("node:") && PACKAGES[top] && !PACKAGES[top]!(specifier!)) {
      found.push(`${file} -> ${specifier} (package not allowed in ${top})`);
    }
  }
  return found;
}

function isTest(file: string): boolean {
  return /\.test\.ts$/.test(file);
}

describe("import direction", () => {
  it("holds for every source file in the tree", () => {
    const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "*.ts", "*.mjs"], { cwd: ROOT, encoding: "utf8" })
      .split("\n")
      .filter(Boolean);
    expect(files.length).toBeGreaterThan(50);
    const found = files.flatMap((file) => {
      try {
        return violations(file, readFileSync(join(ROOT, file), "utf8"));
      } catch {
        return []; // listed by git but deleted in the working tree
      }
    });
    expect(found).toEqual([]);
  });

  it("catches an import against the order, in every form", () => {
    expect(violations("ops/x.ts", 'import { runningStack } from "../local/running.ts";')).toHaveLength(1);
    expect(violations("contract/x.ts", 'import { sql } from "../server-shared/db.ts";')).toHaveLength(1);
    expect(violations("contract/x.ts", 'export { a } from "../sidecar/a.ts";')).toHaveLength(1);
    expect(violations("contract/x.ts", 'const m = await import("../edge/app.ts");')).toHaveLength(1);
    expect(violations("contract/x.ts", 'import { neon } from "@neondatabase/serverless";')).toHaveLength(1);
    expect(violations("edge/x.ts", 'import { Lanes } from "../sidecar/lanes.ts";')).toHaveLength(1);
    expect(violations("server-shared/x.ts", 'import type { Env } from "../edge/env.ts";')).toHaveLength(1);
    expect(violations("clients/cli/x.ts", 'import { ServiceError } from "../../server-shared/errors.ts";')).toHaveLength(1);
  });

  it("allows what the order allows, and tests anywhere", () => {
    expect(violations("local/stack.ts", 'import { migrate } from "../ops/migrate.ts";\nimport { z } from "zod";')).toEqual([]);
    expect(violations("contract/x.ts", 'import { z } from "zod";\nimport { LIMITS } from "./limits.ts";')).toEqual([]);
    expect(violations("sidecar/x.test.ts", 'import { startStack } from "../local/stack.ts";')).toEqual([]);
    expect(violations("test/x.ts", 'import { startStack } from "../local/stack.ts";')).toEqual([]);
  });
});
