/**
 * Imports run one way: local launcher -> operator commands -> server-shared -> contract, and each
 * server tier (edge, sidecar, runtime) sees only server-shared and the contract. The contract is what
 * clients and the web console import, so it imports nothing but zod and itself. Tests and benchmarks
 * may import anything. Within the console, no module imports one that imports it back.
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
  // The web console runs in the browser: its own modules and the wire contract.
  console: ["console", "contract"],
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
  return /\.test\.tsx?$/.test(file);
}

/** Source files of the tree (TypeScript, TSX, ES modules), as git lists them. */
function sourceFiles(): string[] {
  return execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "*.ts", "*.tsx", "*.mjs"], { cwd: ROOT, encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
}

/** The import cycles among `files` (each as the chain that closes it), by their relative imports. */
export function importCycles(files: Map<string, string>): string[][] {
  const edges = new Map<string, string[]>();
  for (const [file, source] of files) {
    const targets = [...source.matchAll(SPECIFIER)].map((m) => m[1]!).filter((s) => s.startsWith(".")).map((s) => normalize(join(dirname(file), s)));
    edges.set(file, targets.filter((t) => files.has(t)));
  }
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const visit = (file: string, path: string[]): void => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "open") {
      cycles.push([...path.slice(path.indexOf(file)), file]);
      return;
    }
    state.set(file, "open");
    for (const next of edges.get(file)!) visit(next, [...path, file]);
    state.set(file, "done");
  };
  for (const file of files.keys()) visit(file, []);
  return cycles;
}

describe("the web console's modules", () => {
  it("import none that imports them back (the pages read their shared state from state.ts, not from the frame)", () => {
    const files = new Map(sourceFiles().filter((f) => f.startsWith("console/src/")).map((f) => [f, readFileSync(join(ROOT, f), "utf8")]));
    expect(files.size).toBeGreaterThan(5);
    expect(importCycles(files)).toEqual([]);
  });

  it("finds a cycle when there is one", () => {
    const files = new Map([
      ["console/src/App.tsx", 'import { Page } from "./pages/Page.tsx";'],
      ["console/src/pages/Page.tsx", 'import { useConsole } from "../App.tsx";'],
      ["console/src/state.ts", ""],
    ]);
    expect(importCycles(files)).toEqual([["console/src/App.tsx", "console/src/pages/Page.tsx", "console/src/App.tsx"]]);
  });
});

describe("import direction", () => {
  it("holds for every source file in the tree", () => {
    const files = sourceFiles();
    expect(files.length).toBeGreaterThan(50);
    expect(files.some((file) => file.startsWith("console/") && file.endsWith(".tsx"))).toBe(true);
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
    expect(violations("console/src/x.tsx", 'import { LIMITS } from "../../server-shared/db.ts";')).toHaveLength(1);
  });

  it("allows what the order allows, and tests anywhere", () => {
    expect(violations("local/stack.ts", 'import { migrate } from "../ops/migrate.ts";\nimport { z } from "zod";')).toEqual([]);
    expect(violations("contract/x.ts", 'import { z } from "zod";\nimport { LIMITS } from "./limits.ts";')).toEqual([]);
    expect(violations("sidecar/x.test.ts", 'import { startStack } from "../local/stack.ts";')).toEqual([]);
    expect(violations("test/x.ts", 'import { startStack } from "../local/stack.ts";')).toEqual([]);
  });
});
