/**
 * The history's own convention: a commit's subject is one line of at most 72 characters, the why in
 * the body after a blank line, so that `git log --oneline` reads as a list of what changed. It holds
 * for every commit after RULE_SINCE, the last commit before the rule (older subjects were long).
 */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const RULE_SINCE = "637e59f";
const SUBJECT_MAX = 72;

const git = (...args: string[]) => execFileSync("git", args, { cwd: new URL("..", import.meta.url), encoding: "utf8" });

/** Every commit after RULE_SINCE on HEAD's history: its hash, its subject as git reads it (the first paragraph, joined) and its first line. */
function commitsSinceRule(): { hash: string; subject: string; firstLine: string }[] {
  const records = git("log", "--format=%h%x00%s%x00%B%x1e", `${RULE_SINCE}..HEAD`).split("\x1e").filter((r) => r.trim() !== "");
  return records.map((record) => {
    const [hash, subject, message] = record.replace(/^\n/, "").split("\0") as [string, string, string];
    return { hash, subject, firstLine: message.split("\n")[0]! };
  });
}

describe("commit messages", () => {
  it("have a subject of one line of at most 72 characters since the rule began", () => {
    // RULE_SINCE is in every clone of main (CI clones its whole history).
    expect(git("rev-parse", "--verify", `${RULE_SINCE}^{commit}`).trim()).toMatch(/^[0-9a-f]{40}$/);
    const commits = commitsSinceRule();
    expect(commits.length).toBeGreaterThan(0);
    const broken = commits.filter((c) => c.subject !== c.firstLine || c.subject.length > SUBJECT_MAX).map((c) => `${c.hash} (${c.subject.length}): ${c.subject}`);
    expect(broken).toEqual([]);
  });
});
