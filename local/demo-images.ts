/**
 * The demonstration image task (runs on a developer machine, in tests and benchmarks): photos this
 * project draws itself, deterministically from a seed, so the local stack can train and serve an
 * image model with nothing downloaded. No labelled photos ship in a registry package in a form a
 * newcomer's first run should wait for; these are honest about what they are: drawings.
 *
 * Each image is 160 x 160: a shape of a random colour, size, place and angle on a random light
 * background, with noise. The task's answers are "circle" and "square"; images of none of them (a
 * triangle, stripes, a cross or a scribble) are the "other" examples a model learns its unknown
 * mass from, and the out-of-task images its unknown detection is measured on.
 *
 *     const images = await demoImages(60);            // [{ png, label: "circle" | "square" | null, kind }, ...]
 *     DEMO_QUESTION                                   // the task's one choice question
 */
import sharp from "sharp";
import { seededRandom } from "../server-shared/random.ts";

/** The question every demonstration example and decision asks. */
export const DEMO_QUESTION_ID = "shape";
export const DEMO_QUESTION = {
  type: "choice",
  instructions: "Which shape is drawn in the photo?",
  criteria: { circle: "a round disc", square: "a square with four equal sides" },
} as const;

export const DEMO_KINDS = ["circle", "square", "triangle", "stripes", "cross", "scribble"] as const;
export type DemoKind = (typeof DEMO_KINDS)[number];

export interface DemoImage {
  png: Uint8Array;
  /** The answer it shows; null when it shows none of them. */
  label: "circle" | "square" | null;
  kind: DemoKind;
  seed: number;
}

const SIZE = 160;

const colour = (next: () => number, min: number, max: number) =>
  `rgb(${[0, 1, 2].map(() => Math.round(min + next() * (max - min))).join(",")})`;

function shapeSvg(kind: DemoKind, next: () => number): string {
  const r = 28 + next() * 30;
  const cx = r + 8 + next() * (SIZE - 2 * r - 16);
  const cy = r + 8 + next() * (SIZE - 2 * r - 16);
  const fill = colour(next, 0, 150);
  const angle = Math.round(next() * 90);
  switch (kind) {
    case "circle":
      return `<circle cx="${cx}" cy="${cy}" r="${r}" fill="${fill}"/>`;
    case "square":
      return `<rect x="${cx - r}" y="${cy - r}" width="${2 * r}" height="${2 * r}" fill="${fill}" transform="rotate(${angle} ${cx} ${cy})"/>`;
    case "triangle":
      return `<polygon points="${cx},${cy - r} ${cx + r},${cy + r * 0.8} ${cx - r},${cy + r * 0.8}" fill="${fill}" transform="rotate(${angle} ${cx} ${cy})"/>`;
    case "stripes":
      return Array.from({ length: 6 }, (_, i) => `<rect x="${i * 28 + next() * 6}" y="0" width="12" height="${SIZE}" fill="${fill}"/>`).join("");
    case "cross":
      return `<g transform="rotate(${angle} ${cx} ${cy})" fill="${fill}"><rect x="${cx - r}" y="${cy - r / 4}" width="${2 * r}" height="${r / 2}"/><rect x="${cx - r / 4}" y="${cy - r}" width="${r / 2}" height="${2 * r}"/></g>`;
    case "scribble": {
      const points = Array.from({ length: 8 }, () => `${Math.round(next() * SIZE)},${Math.round(next() * SIZE)}`).join(" ");
      return `<polyline points="${points}" fill="none" stroke="${fill}" stroke-width="${4 + Math.round(next() * 6)}"/>`;
    }
  }
}

/** One drawing of `kind` from `seed`, as a PNG. */
export async function demoImage(kind: DemoKind, seed: number): Promise<Uint8Array> {
  const next = seededRandom(seed * 7919 + DEMO_KINDS.indexOf(kind));
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${SIZE}" height="${SIZE}"><rect width="100%" height="100%" fill="${colour(next, 190, 255)}"/>${shapeSvg(kind, next)}</svg>`;
  const pixels = await sharp(Buffer.from(svg)).removeAlpha().raw().toBuffer();
  for (let i = 0; i < pixels.length; i++) pixels[i] = Math.max(0, Math.min(255, pixels[i]! + Math.round((next() - 0.5) * 24)));
  return new Uint8Array(await sharp(pixels, { raw: { width: SIZE, height: SIZE, channels: 3 } }).png().toBuffer());
}

/**
 * `perKind` drawings of each answer and, together, about as many of the other kinds (an answer's
 * share each), in a fixed interleaved order, from seed `from` on.
 */
export async function demoImages(perKind: number, from = 1): Promise<DemoImage[]> {
  const out: DemoImage[] = [];
  const others = DEMO_KINDS.filter((kind) => kind !== "circle" && kind !== "square");
  for (let i = 0; i < perKind; i++) {
    const seed = from + i;
    out.push({ png: await demoImage("circle", seed), label: "circle", kind: "circle", seed });
    out.push({ png: await demoImage("square", seed), label: "square", kind: "square", seed });
    const kind = others[i % others.length]!;
    out.push({ png: await demoImage(kind, seed), label: null, kind, seed });
  }
  return out;
}
