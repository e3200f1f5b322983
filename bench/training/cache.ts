/**
 * The training benchmark's per-item results, kept as JSON lines in its cache folder so that a second
 * run reads only what is missing (runs in the benchmark only). Every entry's key starts with the
 * runtime fingerprint and the rendering version, so results of another model, runtime build or
 * rendering are never mixed in; they stay in the file, unused.
 *
 *     const features = new ResultCache<Features>(dir, "features", `${fingerprint}:${RENDERING_VERSION}`);
 *     features.get(item.id) ?? features.put(item.id, await read(item));
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** The benchmark's cache folder unless `--cache` names one: BENCH_TRAINING_CACHE, or ${XDG_CACHE_HOME:-~/.cache}/decision-service/bench-training. */
export function trainingCacheDir(): string {
  return process.env.BENCH_TRAINING_CACHE ?? join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "decision-service", "bench-training");
}

/** One example read as training reads it (execute.ts exampleFeatures): its hidden state and the read's wall time. */
export interface Features {
  features: number[];
  ms: number;
}

/** One state's sentence embedding (runtime-protocol.ts `/v1/embed`), cached under the encoder's fingerprint. */
export interface Embedding {
  embedding: number[];
  tokens: number;
  ms: number;
}

/** One zero-shot answer through a prefix of the readout steps, as a distribution in label order (noul: [yes, no]). */
export interface ZeroShot {
  p: number[];
  passes: number;
  ms: number;
}

/** One decision timed through the runtime: the served zero-shot readout or a trained release. */
export interface Served {
  passes: number;
  ms: number;
  /** When it was timed (the figures are this machine's at that time). */
  at: string;
}

export class ResultCache<T> {
  private readonly entries = new Map<string, T>();
  private readonly file: string;

  constructor(
    dir: string,
    name: string,
    /** The prefix of every key this run reads and writes. */
    private readonly scope: string,
  ) {
    mkdirSync(dir, { recursive: true });
    this.file = join(dir, `${name}.jsonl`);
    if (!existsSync(this.file)) return;
    for (const line of readFileSync(this.file, "utf8").split("\n")) {
      if (!line.startsWith(`{"key":${JSON.stringify(`${scope}:`).slice(0, -1)}`)) continue;
      try {
        const { key, value } = JSON.parse(line) as { key: string; value: T };
        this.entries.set(key, value);
      } catch {
        // a line cut short by a stopped run: read again
      }
    }
  }

  get(key: string): T | undefined {
    return this.entries.get(`${this.scope}:${key}`);
  }

  put(key: string, value: T): T {
    const scoped = `${this.scope}:${key}`;
    this.entries.set(scoped, value);
    appendFileSync(this.file, JSON.stringify({ key: scoped, value }) + "\n");
    return value;
  }

  /** Every entry of this scope whose key starts with `prefix`, in the order they were written. */
  startingWith(prefix: string): T[] {
    const full = `${this.scope}:${prefix}`;
    return [...this.entries].filter(([key]) => key.startsWith(full)).map(([, value]) => value);
  }
}
