/**
 * One measurement of bench/images.ts, in a process of its own (runs under Bun): the time one image
 * takes and the peak resident memory it adds. Prints one JSON line {ms, addedMiB, canonical}.
 *
 *     bun bench/images-sample.ts photo.jpg sidecar    # sidecar/images/preprocess.ts, as completion runs it
 *     bun bench/images-sample.ts photo.jpg baseline   # sharp's decode and PNG write alone
 */
import { readFileSync } from "node:fs";
import sharp from "sharp";
import { preprocessImage } from "../sidecar/images/preprocess.ts";

const [path, mode] = process.argv.slice(2);
if (!path || (mode !== "sidecar" && mode !== "baseline")) throw new Error("usage: images-sample.ts <file.jpg> sidecar|baseline");
sharp.cache(false);
const bytes = new Uint8Array(readFileSync(path));

// Libraries loaded and initialised on a tiny image first: only the image itself is measured.
const tiny = new Uint8Array(await sharp({ create: { width: 8, height: 8, channels: 3, background: "white" } }).jpeg().toBuffer());
await preprocessImage(tiny, "jpeg");
await sharp(tiny).png().toBuffer();
Bun.gc(true);

const before = process.memoryUsage().rss;
const started = performance.now();
let canonical: string;
if (mode === "sidecar") {
  const result = await preprocessImage(bytes, "jpeg");
  if (!result.ok) throw new Error(`refused: ${result.code}`);
  canonical = `${result.canonical.width} x ${result.canonical.height}, ${(result.canonical.bytes / 1024 / 1024).toFixed(1)} MiB`;
} else {
  const { data, info } = await sharp(bytes, { limitInputPixels: false }).png({ compressionLevel: 6 }).toBuffer({ resolveWithObject: true });
  canonical = `${info.width} x ${info.height}, ${(data.byteLength / 1024 / 1024).toFixed(1)} MiB`;
}
const ms = performance.now() - started;
const peak = process.resourceUsage().maxRSS * 1024;
console.log(JSON.stringify({ ms, addedMiB: Math.max(0, peak - before) / 1024 / 1024, canonical }));
