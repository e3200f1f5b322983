/**
 * Content-free readings, kept (runs in the sidecar, under Bun on the GPU host). A question's
 * content-free pass (contextual calibration: the same question about the state "N/A") depends on the
 * question and the runtime only, never on the request's state, so its reading is computed once per
 * runtime identity and rendered pass, and then read from here by real-time decisions, bulk records
 * and training alike.
 *
 *     const key = contentFreeKey(pass);
 *     const logprobs = contentFreeReadings.get(runtime, key) ?? contentFreeReadings.set(runtime, key, await runner.run(pass, words));
 *
 * Only readings from responses stamped with the runtime's identity are stored (the caller's client
 * verifies every response). The key is the rendered pass itself (its segments and its labels); a
 * label's token ids follow from the label and the runtime's fingerprint, which keys the entries too.
 * Bounded: CONTENT_FREE_CACHE_BYTES in all, the least recently read entry going first. When a
 * runtime id is seen with another fingerprint (new weights or rendering behind the same release id),
 * the old fingerprint's entries are dropped at once.
 */
import type { RuntimeIdentity } from "./identity.ts";
import type { Pass } from "./render.ts";

/** What the kept readings may hold in all, keys included (UTF-16 code units counted as 2 bytes). */
export const CONTENT_FREE_CACHE_BYTES = 16 * 1024 * 1024;
/** Bookkeeping counted per entry beside its key and numbers. */
const ENTRY_OVERHEAD_BYTES = 64;

/** The key of a rendered content-free pass. */
export function contentFreeKey(pass: Pass): string {
  return JSON.stringify([pass.prefixSegments, pass.segments.map((s) => [s.text, s.special]), pass.labels]);
}

export class ContentFreeReadings {
  /** fingerprint + "\n" + pass key -> logprobs; a Map keeps insertion order, so the first entry is the least recently read. */
  private readonly entries = new Map<string, readonly number[]>();
  private readonly fingerprints = new Map<string, string>();
  private size = 0;
  hits = 0;
  misses = 0;

  constructor(private readonly maxBytes = CONTENT_FREE_CACHE_BYTES) {}

  get bytes(): number {
    return this.size;
  }

  get count(): number {
    return this.entries.size;
  }

  get(runtime: RuntimeIdentity, key: string): readonly number[] | undefined {
    this.observe(runtime);
    const full = `${runtime.fingerprint}\n${key}`;
    const value = this.entries.get(full);
    if (value === undefined) {
      this.misses += 1;
      return undefined;
    }
    this.hits += 1;
    this.entries.delete(full);
    this.entries.set(full, value);
    return value;
  }

  set(runtime: RuntimeIdentity, key: string, logprobs: readonly number[]): readonly number[] {
    this.observe(runtime);
    const full = `${runtime.fingerprint}\n${key}`;
    const cost = entryBytes(full, logprobs);
    if (cost > this.maxBytes) return logprobs;
    this.remove(full);
    this.entries.set(full, [...logprobs]);
    this.size += cost;
    for (const [oldest, value] of this.entries) {
      if (this.size <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.size -= entryBytes(oldest, value);
    }
    return logprobs;
  }

  clear(): void {
    this.entries.clear();
    this.fingerprints.clear();
    this.size = 0;
  }

  /** Drops every entry of a runtime's previous fingerprint when it shows another one. */
  private observe({ id, fingerprint }: RuntimeIdentity): void {
    const previous = this.fingerprints.get(id);
    if (previous === fingerprint) return;
    this.fingerprints.set(id, fingerprint);
    if (previous === undefined || [...this.fingerprints.values()].includes(previous)) return;
    for (const [full, value] of this.entries) {
      if (!full.startsWith(`${previous}\n`)) continue;
      this.entries.delete(full);
      this.size -= entryBytes(full, value);
    }
  }

  private remove(full: string): void {
    const value = this.entries.get(full);
    if (value === undefined) return;
    this.entries.delete(full);
    this.size -= entryBytes(full, value);
  }
}

function entryBytes(full: string, logprobs: readonly number[]): number {
  return ENTRY_OVERHEAD_BYTES + 2 * full.length + 8 * logprobs.length;
}

/** The sidecar's one store: every execution in this process reads and fills it. */
export const contentFreeReadings = new ContentFreeReadings();
