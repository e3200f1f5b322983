/**
 * mulberry32: a small seeded generator, so that resampling (the training worker's acceptance rule)
 * and generated data sets (tests, benchmarks) are the same on every run. Not for anything secret.
 *
 *     const random = seededRandom(7);          // or seededRandom("a training's id")
 *     random(); // in [0, 1)
 */
export function seededRandom(seed: number | string): () => number {
  let a = typeof seed === "number" ? seed >>> 0 : fnv1a(seed);
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** 32-bit FNV-1a of a string's UTF-16 code units. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
