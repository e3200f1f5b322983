/**
 * Each job rule is written once: as a function in schema.sql that the job store's statements
 * (server-shared/jobs/) and the bulk functions call. This reads the served code (everything the
 * project runs or deploys, not its tests, migrations or clients) and fails when a rule's text appears
 * a second time, so a rule cannot drift from a copy of itself. The rules' behaviour is tested where
 * they act: server-shared/jobs/store.test.ts, test/bulk-*.test.ts, test/trainings.test.ts.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const ROOT = new URL("..", import.meta.url);

/** The served code: tracked source files outside tests, migrations (history), fixtures and the client packages. */
function servedFiles(): { path: string; text: string }[] {
  const tracked = execFileSync("git", ["ls-files"], { cwd: ROOT, encoding: "utf8" }).split("\n");
  return tracked
    .filter((path) => /\.(ts|mjs|js|sql)$/.test(path))
    .filter((path) => !/^(test|migrations|clients|docs)\//.test(path) && !/\.test\.ts$/.test(path))
    .map((path) => ({ path, text: readFileSync(new URL(path, ROOT), "utf8") }));
}

/**
 * A rule: the schema.sql function that defines it, and texts that only a statement of the rule
 * writes (in any alias or parameter naming). None may occur in the served code outside that function's
 * definition, and the definition writes at least one of them.
 */
const RULES: { rule: string; fn: string; texts: RegExp[] }[] = [
  { rule: "the statuses a worker may claim a batch in", fn: "batch_status_open", texts: [/'queued',\s*'validating',\s*'running'\s*\)/g, /"queued",\s*"validating",\s*"running"\s*\]/g] },
  {
    rule: "the statuses a worker may claim a training in",
    fn: "training_status_open",
    texts: [/'queued',\s*'validating',\s*'running',\s*'accepted'\s*\)/g, /"queued",\s*"validating",\s*"running",\s*"accepted"\s*\]/g],
  },
  { rule: "the statuses that end a batch", fn: "batch_status_terminal", texts: [/IN\s*\(\s*'completed',\s*'failed',\s*'cancelled',\s*'expired'\s*\)/g] },
  { rule: "the statuses that end a training", fn: "training_status_terminal", texts: [/IN\s*\(\s*'ready',\s*'rejected',\s*'failed',\s*'cancelled',\s*'expired'\s*\)/g] },
  {
    rule: "which job a worker may claim",
    fn: "job_claimable",
    texts: [/\bexpires_at\s*>\s*now\(\)\s+AND\s+(?:lease_free|\(?\s*[\w.]*lease_expires_at)/g, /_status_open\(\s*[\w.]+\s*\)\s+AND\b/g],
  },
  { rule: "the order in which jobs take turns", fn: "job_turn", texts: [/last_claimed_at\s+NULLS\s+FIRST|coalesce\(\s*[\w.]*last_claimed_at/gi] },
  { rule: "whether a lease is free", fn: "lease_free", texts: [/lease_expires_at\s+IS\s+NULL\s+OR/gi] },
  {
    rule: "the fence",
    fn: "job_lease_held",
    texts: [/lease_token\s*(?:=|IS NOT DISTINCT FROM|IS DISTINCT FROM)\s*[\w.$]+(?:::uuid)?\s+(?:AND|OR)\s+[\w.]*lease_expires_at\s*(?:>|<=)\s*now\(\)/gi],
  },
  { rule: "which batch record may run", fn: "batch_record_runnable", texts: [/not_before\s+IS\s+NULL\s+OR/gi, /release_id\s*=\s*ANY\b/gi] },
];

/** Where a function's definition lies in schema.sql: from its CREATE FUNCTION to the blank line after it. */
function definition(schema: string, fn: string): { start: number; end: number } {
  const start = schema.indexOf(`CREATE FUNCTION ${fn}(`);
  if (start === -1) throw new Error(`schema.sql defines no function ${fn}`);
  const end = schema.indexOf("\n\n", start);
  return { start, end: end === -1 ? schema.length : end };
}

describe("the job rules", () => {
  const files = servedFiles();
  const schema = files.find((f) => f.path === "schema.sql")!.text;

  it.each(RULES)("$rule is written once, in schema.sql's $fn", ({ fn, texts }) => {
    expect(schema.split(`CREATE FUNCTION ${fn}(`).length - 1).toBe(1);
    const home = definition(schema, fn);
    let atHome = 0;
    for (const text of texts) {
      const found = files.flatMap((f) => [...f.text.matchAll(text)].map((m) => ({ path: f.path, at: m.index, match: m[0] })));
      const inHome = (f: (typeof found)[number]) => f.path === "schema.sql" && f.at > home.start && f.at < home.end;
      expect(found.filter((f) => !inHome(f)).map((f) => `${f.path}: ${f.match}`)).toEqual([]);
      atHome += found.filter(inHome).length;
    }
    // The texts are the rule's own: its definition writes them (a rule rewritten keeps this test true).
    expect(atHome).toBeGreaterThan(0);
  });

  it("are what the store's statements and the bulk functions call, by name", () => {
    const text = (path: string) => files.find((f) => f.path === path)!.text;
    const store = text("server-shared/jobs/store.ts");
    for (const fn of ["job_claimable(", "job_turn(", "job_lease_held("]) expect(store).toContain(fn);
    expect(text("server-shared/jobs/batches.ts")).toContain("batch_record_runnable(");
    expect(text("server-shared/jobs/batches.ts")).toContain('statuses: { terminal: "batch_status_terminal", open: "batch_status_open" }');
    expect(text("server-shared/jobs/trainings.ts")).toContain('statuses: { terminal: "training_status_terminal", open: "training_status_open" }');
    const claim = schema.slice(definition(schema, "bulk_claim_records").start, definition(schema, "bulk_claim_records").end);
    for (const fn of ["job_claimable(batch_status_open(", "job_turn(", "batch_record_runnable("]) expect(claim).toContain(fn);
    const commit = schema.slice(definition(schema, "bulk_commit_records").start, definition(schema, "bulk_commit_records").end);
    expect(commit).toContain("job_lease_held(");
  });

  it("finds a second copy: a rule's text pasted into another file is counted", () => {
    const copy = "SELECT 1 FROM batches c WHERE c.status IN ('queued', 'validating', 'running') AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())";
    expect([...copy.matchAll(RULES[0]!.texts[0]!)]).toHaveLength(1);
    expect([...copy.matchAll(RULES.find((r) => r.fn === "lease_free")!.texts[0]!)]).toHaveLength(1);
  });
});
