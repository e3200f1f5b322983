/**
 * Prometheus metrics for the GPU host's processes (the sidecar and the runtimes, under Bun): counters,
 * gauges read at scrape time, and histograms, rendered in the text exposition format 0.0.4. Names
 * follow Prometheus conventions (`svc_` prefix, base units, `_total` for counters, `_seconds` for
 * durations). Labels are the code's constants (lanes, statuses, error codes), never request content.
 *
 *     const metrics = new Metrics();
 *     const refusals = metrics.counter("svc_lane_refusals_total", "Executions refused by a lane.", ["lane", "code"]);
 *     refusals.inc({ lane: "realtime", code: "lane_full" });
 *     metrics.gauge("svc_lane_waiting", "Executions waiting in a lane.", () => [{ labels: { lane: "bulk" }, value: 1 }]);
 *     app.get("/metrics", metricsHandler(metrics, () => secrets.list("METRICS_SECRET")?.accepted));
 *
 * `/metrics` answers only a bearer of METRICS_SECRET (the operator's scrape secret, rotated as the
 * other secrets are); where that secret is not set the route does not exist (404).
 */
import type { Handler } from "hono";
import { errorBody } from "../contract/errors.ts";
import { presentsSecret } from "./http.ts";

export const METRICS_PATH = "/metrics";
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Record<string, string>;
type Sample = { labels: Labels; value: number };

/** Latency buckets in seconds: from a 1 ms GPU pass to a 30 s lane wait. */
export const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface Family {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram";
  samples(): Promise<{ suffix: string; labels: Labels; value: number }[]>;
}

const key = (labels: Labels) => JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)));

export class Counter {
  private readonly values = new Map<string, Sample>();
  constructor(private readonly labelNames: readonly string[]) {}

  inc(labels: Labels = {}, by = 1): void {
    checkLabels(this.labelNames, labels);
    const k = key(labels);
    const sample = this.values.get(k) ?? { labels, value: 0 };
    sample.value += by;
    this.values.set(k, sample);
  }

  /** The current value for `labels` (tests, and the sidecar's own reading). */
  get(labels: Labels = {}): number {
    return this.values.get(key(labels))?.value ?? 0;
  }

  samples(): Sample[] {
    return [...this.values.values()];
  }
}

export class Histogram {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    private readonly labelNames: readonly string[],
    readonly buckets: readonly number[],
  ) {}

  observe(labels: Labels, value: number): void {
    checkLabels(this.labelNames, labels);
    const k = key(labels);
    const series = this.series.get(k) ?? { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
    this.buckets.forEach((bound, i) => {
      if (value <= bound) series.counts[i]! += 1;
    });
    series.sum += value;
    series.count += 1;
    this.series.set(k, series);
  }

  samples(): { suffix: string; labels: Labels; value: number }[] {
    return [...this.series.values()].flatMap(({ labels, counts, sum, count }) => [
      ...this.buckets.map((bound, i) => ({ suffix: "_bucket", labels: { ...labels, le: String(bound) }, value: counts[i]! })),
      { suffix: "_bucket", labels: { ...labels, le: "+Inf" }, value: count },
      { suffix: "_sum", labels, value: sum },
      { suffix: "_count", labels, value: count },
    ]);
  }
}

export class Metrics {
  private readonly families: Family[] = [];

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    const counter = new Counter(labelNames);
    this.add({ name, help, type: "counter", samples: async () => counter.samples().map((s) => ({ suffix: "", ...s })) });
    return counter;
  }

  /** A counter whose value is read at scrape time (a running total kept elsewhere, e.g. the engine's). */
  counterFrom(name: string, help: string, read: () => Sample[] | Promise<Sample[]>): void {
    this.add({ name, help, type: "counter", samples: async () => (await read()).map((s) => ({ suffix: "", ...s })) });
  }

  /** A gauge read at scrape time. */
  gauge(name: string, help: string, read: () => Sample[] | Promise<Sample[]>): void {
    this.add({ name, help, type: "gauge", samples: async () => (await read()).map((s) => ({ suffix: "", ...s })) });
  }

  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets: readonly number[] = SECONDS_BUCKETS): Histogram {
    const histogram = new Histogram(labelNames, buckets);
    this.add({ name, help, type: "histogram", samples: async () => histogram.samples() });
    return histogram;
  }

  /** The exposition text. A family whose reading fails (Postgres away) is left out, and says so in a comment. */
  async render(): Promise<string> {
    const parts = await Promise.all(
      this.families.map(async (family) => {
        const head = `# HELP ${family.name} ${family.help}\n# TYPE ${family.name} ${family.type}\n`;
        try {
          const samples = await family.samples();
          return head + samples.map((s) => `${family.name}${s.suffix}${renderLabels(s.labels)} ${renderValue(s.value)}\n`).join("");
        } catch {
          return `# ${family.name} could not be read at this scrape\n`;
        }
      }),
    );
    return parts.join("");
  }

  private add(family: Family): void {
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(family.name)) throw new Error(`bad metric name ${family.name}`);
    if (this.families.some((f) => f.name === family.name)) throw new Error(`metric ${family.name} registered twice`);
    this.families.push(family);
  }
}

/** GET /metrics: the exposition to a bearer of the operator's scrape secret; 401 to anyone else; 404 where none is set. */
export function metricsHandler(metrics: Metrics, accepted: () => readonly string[] | undefined): Handler {
  return async (c) => {
    const secrets = accepted();
    if (!secrets?.length) return c.json(errorBody("not_found", `no route for GET ${METRICS_PATH}`), 404);
    if (!(await presentsSecret(c, secrets))) return c.json(errorBody("invalid_credentials", "the metrics scrape secret is missing or wrong"), 401);
    return c.body(await metrics.render(), 200, { "content-type": METRICS_CONTENT_TYPE, "cache-control": "no-store" });
  };
}

function checkLabels(names: readonly string[], labels: Labels): void {
  const given = Object.keys(labels);
  if (given.length !== names.length || !names.every((n) => n in labels)) throw new Error(`labels ${given.join(",")} are not ${names.join(",")}`);
}

function renderLabels(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  return `{${entries.map(([name, value]) => `${name}="${value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')}"`).join(",")}}`;
}

function renderValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}
