/**
 * An open-loop load generator for the benchmarks: sends requests at a fixed rate whatever the
 * latency (so slow answers cannot hide by slowing the sender) and reports latency percentiles, and
 * the CPU time a process group (a local stack child and its descendants) spent per request.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface LoadResult {
  label: string;
  sent: number;
  statuses: Record<number, number>;
  p50: number;
  p99: number;
  max: number;
  /** CPU milliseconds the measured process group spent per request; NaN when none was measured. */
  cpuMsPerRequest: number;
}

export async function fixedRate(label: string, ratePerSecond: number, seconds: number, send: () => Promise<Response>, cpuGroup?: number): Promise<LoadResult> {
  const cpuBefore = cpuGroup === undefined ? NaN : groupCpuMs(cpuGroup);
  const total = Math.round(ratePerSecond * seconds);
  const interval = 1000 / ratePerSecond;
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  const started = performance.now();
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    inflight.push(
      (async () => {
        const t0 = performance.now();
        const res = await send();
        await res.arrayBuffer();
        latencies.push(performance.now() - t0);
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      })(),
    );
  }
  await Promise.all(inflight);
  const cpuMsPerRequest = cpuGroup === undefined ? NaN : (groupCpuMs(cpuGroup) - cpuBefore) / total;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { label, sent: total, statuses, p50: at(0.5), p99: at(0.99), max: latencies.at(-1) ?? NaN, cpuMsPerRequest };
}

export function printResults(results: LoadResult[], baseline: LoadResult): void {
  console.log(`${"route".padEnd(44)} ${"p50 ms".padStart(8)} ${"p99 ms".padStart(8)} ${"max ms".padStart(8)} ${"p50 ratio".padStart(10)} ${"p99 ratio".padStart(10)} ${"CPU ms/req".padStart(10)}  statuses`);
  for (const r of results) {
    console.log(
      `${r.label.padEnd(44)} ${r.p50.toFixed(2).padStart(8)} ${r.p99.toFixed(2).padStart(8)} ${r.max.toFixed(2).padStart(8)} ${(r.p50 / baseline.p50).toFixed(2).padStart(10)} ${(r.p99 / baseline.p99).toFixed(2).padStart(10)} ${r.cpuMsPerRequest.toFixed(2).padStart(10)}  ${JSON.stringify(r.statuses)}`,
    );
  }
}

/** Linux's USER_HZ: /proc reports CPU time in these ticks. */
const CLOCK_TICKS_PER_SECOND = 100;

/** CPU milliseconds (user + system) of every live process in the group `pgid` (a stack child leads its own group). */
export function groupCpuMs(pgid: number): number {
  let ticks = 0;
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      // The fields after the command (which may hold spaces): state, ppid, pgrp (3rd), ..., utime (12th), stime (13th).
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) === pgid) ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The process ended while the list was read.
    }
  }
  return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** CPU milliseconds (user + system) of the process `pid` and of every live process it started (a Postgres server and its backends). */
export function treeCpuMs(pid: number): number {
  const stats = new Map<number, { ppid: number; ticks: number }>();
  for (const name of readdirSync("/proc").filter((entry) => /^\d+$/.test(entry))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      stats.set(Number(name), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // The process ended while the list was read.
    }
  }
  const inTree = (id: number): boolean => id === pid || (id > 1 && stats.has(id) && inTree(stats.get(id)!.ppid));
  let ticks = 0;
  for (const [id, { ticks: own }] of stats) if (inTree(id)) ticks += own;
  return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** CPU milliseconds the whole machine has been busy, all cores together (/proc/stat: all but idle and iowait), the kernel's own work included. */
export function machineBusyMs(): number {
  const [, ...fields] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq, steal] = fields.map(Number);
  return ((user! + nice! + system! + irq! + softirq! + steal!) * 1000) / CLOCK_TICKS_PER_SECOND;
}
