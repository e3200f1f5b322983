/**
 * `npm run bench:images` (issue 27): what checking and canonicalizing an uploaded photo costs the
 * sidecar (sidecar/images/preprocess.ts), per JPEG of 1, 4, 12 and 16 megapixels: wall time and the
 * memory it adds to the process at its peak. Each measurement runs in a fresh Bun process
 * (bench/images-sample.ts) so that its peak resident set is its own, and the baseline (the same
 * bytes decoded and written as a PNG by sharp with nothing else: no header checks, no orientation,
 * no flattening, no scaling, no chunk filtering) alternates with it on the same files.
 *
 * Then the largest image the sidecar processes within IMAGE_MEMORY_BOUND_MIB: every accepted size is
 * at most 16 million pixels (LIMITS.imagePixels), so the search climbs to that limit; a size past
 * the bound would be reported as the first that is over it.
 *
 *     npm run bench:images              # about 15 seconds on 2 CPU cores
 *     RUNS=5 npm run bench:images       # more samples per size (default 3)
 *
 * Figures of RUNS=5 on 2026-11-25 (2-core CPU, sharp 0.34.5, libvips 8.17.3), median ms and the
 * largest addition to the process's memory at its peak:
 *
 *     size    pixels       JPEG bytes   sidecar ms   + MiB   baseline ms   + MiB   canonical
 *     1 MP     1,000,230      453,147           86      14            79       7   1155 x 866
 *     4 MP     3,999,188    1,786,303          257      40           302      35   1999 x 1499
 *     12 MP   12,000,000    5,286,414          230     121           876     121   2000 x 1500
 *     16 MP   15,996,752    7,052,779          234     175         1,151     175   1999 x 1499
 *
 * Past 3 million pixels the canonical image is scaled down, and libvips decodes a JPEG at a half or a
 * quarter of its size when that is enough (shrink-on-load): the 16 MP photo takes a fifth of the
 * baseline's time. Every accepted image stays within the 256 MiB bound.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { LIMITS } from "../contract/limits.ts";
import { photoPixels } from "../test/support/images.ts";

/**
 * The published bound: preprocessing one image adds at most this much to the sidecar's resident
 * memory (README, "Image assets"). One image is preprocessed at a time (sidecar/images/finalize.ts).
 */
export const IMAGE_MEMORY_BOUND_MIB = 256;

const runs = Number(process.env.RUNS ?? 3);
const SIZES: { name: string; width: number; height: number }[] = [
  { name: "1 MP", width: 1155, height: 866 },
  { name: "4 MP", width: 2309, height: 1732 },
  { name: "12 MP", width: 4000, height: 3000 },
  { name: "16 MP", width: 4618, height: 3464 },
];

interface Sample {
  ms: number;
  addedMiB: number;
  canonical: string;
}

function sample(path: string, mode: "sidecar" | "baseline"): Sample {
  const child = spawnSync(process.execPath, [join(import.meta.dir, "images-sample.ts"), path, mode], { encoding: "utf8" });
  if (child.status !== 0) throw new Error(`sample failed: ${child.stderr}`);
  return JSON.parse(child.stdout.trim().split("\n").at(-1)!) as Sample;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const dir = mkdtempSync(join(tmpdir(), "bench-images-"));
try {
  console.log(`images: sharp ${sharp.versions.sharp} (libvips ${sharp.versions.vips}), ${runs} runs per size and path, ${new Date().toISOString()}`);
  console.log("  size     pixels        JPEG bytes   sidecar ms   + MiB   baseline ms   + MiB   time x   canonical");
  let largestWithin: string | null = null;
  let firstOver: string | null = null;
  for (const size of SIZES) {
    const jpeg = await sharp(photoPixels(size.width, size.height), { raw: { width: size.width, height: size.height, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
    const path = join(dir, `${size.width}x${size.height}.jpg`);
    writeFileSync(path, jpeg);
    const ours: Sample[] = [];
    const base: Sample[] = [];
    for (let i = 0; i < runs; i++) {
      // Interleaved, the baseline first on odd runs, so that neither path always runs on a warmer page cache.
      if (i % 2 === 0) {
        ours.push(sample(path, "sidecar"));
        base.push(sample(path, "baseline"));
      } else {
        base.push(sample(path, "baseline"));
        ours.push(sample(path, "sidecar"));
      }
    }
    const oursMs = median(ours.map((s) => s.ms));
    const baseMs = median(base.map((s) => s.ms));
    const oursMiB = Math.max(...ours.map((s) => s.addedMiB));
    const baseMiB = Math.max(...base.map((s) => s.addedMiB));
    console.log(
      `  ${size.name.padEnd(7)}  ${(size.width * size.height).toLocaleString("en-US").padStart(10)}  ${jpeg.byteLength.toLocaleString("en-US").padStart(12)}` +
        `  ${oursMs.toFixed(0).padStart(11)}  ${oursMiB.toFixed(0).padStart(6)}  ${baseMs.toFixed(0).padStart(12)}  ${baseMiB.toFixed(0).padStart(6)}` +
        `  ${(oursMs / baseMs).toFixed(2).padStart(7)}   ${ours[0]!.canonical}`,
    );
    if (oursMiB <= IMAGE_MEMORY_BOUND_MIB) largestWithin = `${size.name} (${size.width} x ${size.height})`;
    else firstOver ??= `${size.name} (${oursMiB.toFixed(0)} MiB)`;
  }
  console.log(
    `  bound ${IMAGE_MEMORY_BOUND_MIB} MiB added at peak: the largest size within it is ${largestWithin ?? "none"}` +
      (firstOver ? `; first over it: ${firstOver}` : `, which is the largest image accepted (${LIMITS.imagePixels.toLocaleString("en-US")} pixels)`),
  );
  console.log("  (+ MiB: the peak resident set of a fresh process while it handles one image, less its resident set just before)");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
