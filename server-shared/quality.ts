/**
 * Figures of probabilistic predictions (any tier; pure functions, no I/O): how well scores rank
 * (AUROC), how well confidences match observed frequencies (ECE, reliability bins and their SVG
 * diagram), and the Brier score of distributions.
 *
 *     auroc([0.9, 0.2, 0.7], [true, false, false]);      // 1: every positive outranks every negative
 *     ece([0.8, 0.8, 0.3], [true, false, false]);         // Σ_b (n_b/N)·|mean confidence − accuracy|
 *     brier([[0.7, 0.3]], [0]);                           // 0.18 = 0.3² + 0.3²
 *     binaryBrier([0.7], [true]);                         // 0.09 = 0.3²
 *     reliabilitySvg("noul", [{ name: "before", bins: reliabilityBins(conf, correct) }]);
 *
 * Every input is checked: empty or mismatched inputs and values outside [0, 1] (NaN included) throw
 * a RangeError rather than producing a figure that quietly means nothing.
 */

import type { ReliabilityBin } from "../contract/calibration.ts";

/** One equal-width confidence bin [lower, upper) (the last bin is closed); null figures when empty. */
export type { ReliabilityBin };

/**
 * Area under the ROC curve as the Mann–Whitney rank statistic: the probability that a random
 * positive scores above a random negative, a tie counting 1/2. Sort-based with average ranks for
 * ties, so O(n log n). Null when either class is empty (the area is undefined).
 */
export function auroc(scores: readonly number[], positives: readonly boolean[]): number | null {
  checkPaired(scores, positives, "scores", "labels");
  checkUnit(scores, "score");
  const nPos = positives.reduce((n, y) => n + (y ? 1 : 0), 0);
  const nNeg = positives.length - nPos;
  if (nPos === 0 || nNeg === 0) return null;

  const order = scores.map((_, i) => i).sort((a, b) => scores[a]! - scores[b]!);
  let positiveRankSum = 0;
  for (let start = 0; start < order.length; ) {
    let end = start;
    while (end + 1 < order.length && scores[order[end + 1]!] === scores[order[start]!]) end++;
    // Ranks are 1-based; every member of a tie group gets the group's average rank.
    const averageRank = (start + end) / 2 + 1;
    for (let k = start; k <= end; k++) if (positives[order[k]!]) positiveRankSum += averageRank;
    start = end + 1;
  }
  const u = positiveRankSum - (nPos * (nPos + 1)) / 2;
  return u / (nPos * nNeg);
}

/**
 * Equal-width bins over [0, 1]: bin b holds confidences in [b/bins, (b+1)/bins), and a confidence of
 * exactly 1 goes into the last bin. Every bin is returned, empty ones with null figures.
 */
export function reliabilityBins(confidences: readonly number[], correct: readonly boolean[], bins = 10): ReliabilityBin[] {
  checkPaired(confidences, correct, "confidences", "outcomes");
  checkUnit(confidences, "confidence");
  if (!Number.isInteger(bins) || bins < 1) throw new RangeError(`bins must be a positive integer, got ${bins}`);
  const counts = new Array<number>(bins).fill(0);
  const confidenceSums = new Array<number>(bins).fill(0);
  const hits = new Array<number>(bins).fill(0);
  confidences.forEach((c, i) => {
    const b = Math.min(Math.floor(c * bins), bins - 1);
    counts[b]! += 1;
    confidenceSums[b]! += c;
    if (correct[i]) hits[b]! += 1;
  });
  return counts.map((count, b) => ({
    lower: b / bins,
    upper: (b + 1) / bins,
    count,
    mean_confidence: count === 0 ? null : confidenceSums[b]! / count,
    accuracy: count === 0 ? null : hits[b]! / count,
  }));
}

/** Expected calibration error of already-built bins: Σ_b (n_b/N)·|mean confidence_b − accuracy_b|. */
export function eceOfBins(bins: readonly ReliabilityBin[]): number {
  const total = bins.reduce((n, bin) => n + bin.count, 0);
  if (total === 0) throw new RangeError("no items in any bin");
  let sum = 0;
  for (const bin of bins) {
    if (bin.count === 0 || bin.mean_confidence === null || bin.accuracy === null) continue;
    sum += (bin.count / total) * Math.abs(bin.mean_confidence - bin.accuracy);
  }
  return sum;
}

/** Expected calibration error with `bins` equal-width bins (see `reliabilityBins`). */
export function ece(confidences: readonly number[], correct: readonly boolean[], bins = 10): number {
  return eceOfBins(reliabilityBins(confidences, correct, bins));
}

/**
 * Multi-class Brier score: the mean over items of Σ_i (p_i − [i = truth])², in [0, 2]. A yes/no
 * question passed as [p, 1 − p] (truth 0 for yes) scores twice the usual binary Brier score, since
 * both labels' errors count; `binaryBrier` is the usual one, and the one quoted for noul.
 */
export function brier(probabilities: readonly (readonly number[])[], truth: readonly number[]): number {
  checkPaired(probabilities, truth, "distributions", "true indices");
  let sum = 0;
  probabilities.forEach((p, item) => {
    checkUnit(p, "probability");
    const t = truth[item]!;
    if (!Number.isInteger(t) || t < 0 || t >= p.length) throw new RangeError(`true index ${t} is not one of the ${p.length} labels of item ${item}`);
    for (let i = 0; i < p.length; i++) sum += (p[i]! - (i === t ? 1 : 0)) ** 2;
  });
  return sum / probabilities.length;
}

/** Binary Brier score: the mean of (p − y)², y = 1 for a positive; in [0, 1]. */
export function binaryBrier(p: readonly number[], positives: readonly boolean[]): number {
  checkPaired(p, positives, "probabilities", "labels");
  checkUnit(p, "probability");
  return p.reduce((sum, pi, i) => sum + (pi - (positives[i] ? 1 : 0)) ** 2, 0) / p.length;
}

/** Grey for the first ("before") series, blue for the second ("after"), then distinct hues. */
/** Pairs of a light and a strong shade, so that a "before" and an "after" series of one type read together. */
const SERIES_COLOURS = ["#9ab8e0", "#1f6fd1", "#f2a3a3", "#d62728", "#a8d8a0", "#2ca02c"] as const;

const WIDTH = 540;
const HEIGHT = 400;
const PLOT = { left: 60, top: 50, size: 300 } as const;

/**
 * The headers a diagram is served with: its type, no sniffing, and a policy of its own that lets it
 * load and run nothing (opened on its own, an SVG is a document: the policy holds even if a label
 * ever escaped its escaping).
 */
export const SVG_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "image/svg+xml; charset=utf-8",
  "x-content-type-options": "nosniff",
  "content-security-policy": "default-src 'none'; sandbox",
};

/**
 * A self-contained SVG reliability diagram (no scripts, no external references): x the mean
 * confidence of a bin, y its accuracy, the diagonal dashed as the perfectly calibrated reference,
 * one line with markers per series, and a legend. Empty bins are skipped; text is XML-escaped.
 */
export function reliabilitySvg(title: string, series: readonly { name: string; bins: readonly ReliabilityBin[] }[]): string {
  const x = (v: number) => PLOT.left + v * PLOT.size;
  const y = (v: number) => PLOT.top + (1 - v) * PLOT.size;
  const bottom = y(0);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    `<text x="${WIDTH / 2}" y="28" text-anchor="middle" font-size="${titleFontSize(title)}">${escapeXml(title)}</text>`,
    `<rect x="${x(0)}" y="${y(1)}" width="${PLOT.size}" height="${PLOT.size}" fill="none" stroke="#000000"/>`,
    `<line x1="${x(0)}" y1="${y(0)}" x2="${x(1)}" y2="${y(1)}" stroke="#aaaaaa" stroke-dasharray="5,4"/>`,
  ];
  for (const tick of [0, 0.5, 1]) {
    out.push(
      `<line x1="${x(tick)}" y1="${bottom}" x2="${x(tick)}" y2="${bottom + 5}" stroke="#000000"/>`,
      `<text x="${x(tick)}" y="${bottom + 18}" text-anchor="middle">${fmt(tick)}</text>`,
      `<line x1="${x(0) - 5}" y1="${y(tick)}" x2="${x(0)}" y2="${y(tick)}" stroke="#000000"/>`,
      `<text x="${x(0) - 8}" y="${y(tick) + 4}" text-anchor="end">${fmt(tick)}</text>`,
    );
  }
  out.push(
    `<text x="${x(0.5)}" y="${bottom + 38}" text-anchor="middle">confidence</text>`,
    `<text x="18" y="${y(0.5)}" text-anchor="middle" transform="rotate(-90 18 ${y(0.5)})">observed frequency</text>`,
  );
  series.forEach((s, k) => {
    const colour = SERIES_COLOURS[k % SERIES_COLOURS.length]!;
    const points = s.bins.filter((bin) => bin.count > 0 && bin.mean_confidence !== null && bin.accuracy !== null);
    for (const bin of points) checkUnit([bin.mean_confidence!, bin.accuracy!], `bin figure of series ${k}`);
    const coords = points.map((bin) => [fmt(x(bin.mean_confidence!)), fmt(y(bin.accuracy!))] as const);
    if (coords.length > 0) {
      out.push(`<polyline fill="none" stroke="${colour}" stroke-width="2" points="${coords.map(([cx, cy]) => `${cx},${cy}`).join(" ")}"/>`);
    }
    for (const [cx, cy] of coords) out.push(`<circle cx="${cx}" cy="${cy}" r="3.5" fill="${colour}"/>`);
    const legendY = PLOT.top + 10 + k * 20;
    out.push(
      `<line x1="${x(1) + 16}" y1="${legendY}" x2="${x(1) + 36}" y2="${legendY}" stroke="${colour}" stroke-width="2"/>`,
      `<circle cx="${x(1) + 26}" cy="${legendY}" r="3.5" fill="${colour}"/>`,
      `<text x="${x(1) + 42}" y="${legendY + 4}">${escapeXml(s.name)}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n");
}

/**
 * The title's font size: 15, or smaller so that a long title (a trained model's id) fits the width,
 * taking a character of sans-serif as about 0.6 of the size (no font metrics in an SVG string).
 */
export function titleFontSize(title: string): number {
  return Math.max(8, Math.min(15, Math.floor((WIDTH - 20) / (0.6 * Math.max(1, [...title].length)))));
}

/**
 * Text made safe inside an XML element or attribute: the five markup characters escaped, and any
 * character XML 1.0 forbids even escaped (control characters, lone surrogates) replaced by U+FFFD.
 */
export function escapeXml(text: string): string {
  return text
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "\uFFFD")
    .replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c]!);
}

/** At most two decimals, no trailing zeros, never "-0". */
function fmt(v: number): string {
  const rounded = Math.round(v * 100) / 100;
  return String(rounded === 0 ? 0 : rounded);
}

function checkPaired(a: readonly unknown[], b: readonly unknown[], aName: string, bName: string): void {
  if (a.length === 0) throw new RangeError(`no ${aName}`);
  if (a.length !== b.length) throw new RangeError(`${a.length} ${aName} but ${b.length} ${bName}`);
}

function checkUnit(values: readonly number[], what: string): void {
  for (const v of values) if (!(v >= 0 && v <= 1)) throw new RangeError(`${what} must be in [0, 1], got ${v}`);
}
