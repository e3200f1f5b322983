/**
 * SHA-256 digests of model files (runs wherever a GGUF lives: the runtime on a GPU host, and the local
 * model installer on a developer machine).
 *
 * Hashing a weights file takes about a second per 250 MB, so `cachedSha256` keeps the digest beside
 * the file in `<file>.sha256` as `{"size":…,"mtimeMs":…,"sha256":…}` and trusts it while the file's
 * size and modification time are unchanged.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile, stat, writeFile } from "node:fs/promises";

/** Hex SHA-256 of a file, read as a stream so that a multi-gigabyte GGUF never sits in memory. */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 1024 * 1024 })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

interface DigestRecord {
  size: number;
  mtimeMs: number;
  sha256: string;
}

export function digestRecordPath(path: string): string {
  return `${path}.sha256`;
}

/**
 * Hex SHA-256 of a file, from `<file>.sha256` when that record still describes the file, otherwise
 * hashed and recorded. A record that cannot be written (a read-only folder) only costs the next start
 * another hash.
 */
export async function cachedSha256(path: string): Promise<string> {
  const before = await stat(path);
  const record = await readRecord(path);
  if (record && record.size === before.size && record.mtimeMs === before.mtimeMs) return record.sha256;

  const sha256 = await sha256File(path);
  const after = await stat(path);
  // A file that changed while it was read gets no record; its digest is still returned once.
  if (after.size === before.size && after.mtimeMs === before.mtimeMs) {
    const fresh: DigestRecord = { size: after.size, mtimeMs: after.mtimeMs, sha256 };
    await writeFile(digestRecordPath(path), JSON.stringify(fresh)).catch(() => undefined);
  }
  return sha256;
}

async function readRecord(path: string): Promise<DigestRecord | undefined> {
  try {
    const parsed: unknown = JSON.parse(await readFile(digestRecordPath(path), "utf8"));
    if (typeof parsed !== "object" || parsed === null) return undefined;
    const { size, mtimeMs, sha256 } = parsed as Record<string, unknown>;
    if (typeof size !== "number" || typeof mtimeMs !== "number") return undefined;
    if (typeof sha256 !== "string" || !/^[0-9a-f]{64}$/.test(sha256)) return undefined;
    return { size, mtimeMs, sha256 };
  } catch {
    return undefined;
  }
}
