/**
 * The shared secrets of the internal links (edge↔sidecar, sidecar→runtime), read so that they can be
 * rotated without downtime (runs in the sidecar and the runtime under Bun; the edge parses lists only).
 *
 *   NAME=value         the secret itself (the local stack, tests, the edge's `wrangler secret put`)
 *   NAME_FILE=/path    a file that holds it (a GPU host: mode 0600, owned by the service's user);
 *                      read at start and again whenever the process gets SIGHUP (`systemctl reload`)
 *
 * A value may list several secrets separated by commas while one is being rotated: the first is the
 * one this tier sends, and every one is accepted (server-shared/secret-list.ts). docs/deploy.md gives
 * the rotation steps.
 *
 *     const secrets = new SecretSource(process.env);
 *     secrets.list("SIDECAR_SECRET");   // { send: "new", accepted: ["new", "old"] }, or undefined when unset
 *     process.on("SIGHUP", () => secrets.reload());
 */
import { readFileSync } from "node:fs";
import { parseSecretList, type SecretList } from "./secret-list.ts";

export type { SecretList } from "./secret-list.ts";

/** Where a tier reads its secrets by name (a SecretSource; tests may give a plain one). */
export interface SecretReader {
  list(name: string): SecretList | undefined;
}

export class SecretSource implements SecretReader {
  private readonly read = new Map<string, SecretList | undefined>();

  constructor(private readonly env: Record<string, string | undefined>) {}

  /** NAME's secrets (from NAME, else from the file NAME_FILE names); undefined when neither is set. Throws when unreadable. */
  list(name: string): SecretList | undefined {
    if (!this.read.has(name)) this.read.set(name, this.load(name));
    return this.read.get(name);
  }

  /**
   * Reads every secret read so far again. One that cannot be read now (a file half-written, removed)
   * keeps its previous value, and its name is returned so the caller can say so.
   */
  reload(): string[] {
    const failed: string[] = [];
    for (const name of this.read.keys()) {
      try {
        this.read.set(name, this.load(name));
      } catch {
        failed.push(name);
      }
    }
    return failed;
  }

  private load(name: string): SecretList | undefined {
    const direct = this.env[name];
    const file = this.env[`${name}_FILE`];
    if (direct && file) throw new Error(`setting ${name} and ${name}_FILE are both set; set one`);
    if (direct) return parseList(name, direct);
    if (!file) return undefined;
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new Error(`setting ${name}_FILE: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
    }
    return parseList(`${name}_FILE`, text);
  }
}

function parseList(setting: string, raw: string): SecretList {
  try {
    return parseSecretList(raw);
  } catch (err) {
    throw new Error(`setting ${setting} ${(err as Error).message}`);
  }
}
