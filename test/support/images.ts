/**
 * Real image files for tests, written by sharp (libvips) at test time; the few files no library
 * writes (an animated PNG, chunks added to a PNG) are assembled from sharp's own output, chunk by
 * chunk. Nothing binary is committed.
 *
 *     const jpeg = await photo(640, 480);                   // a JPEG with a gradient and noise
 *     const rotated = await quadrants({ orientation: 6 });  // four coloured quadrants, EXIF-rotated
 *     const apng = await animatedPng();                      // two frames
 */
import { createHash } from "node:crypto";
import { crc32 } from "node:zlib";
import sharp from "sharp";

export const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Pixels that compress like a photo (a gradient with noise), `width` x `height`, RGB. */
export function photoPixels(width: number, height: number, seed = 1): Buffer {
  const raw = Buffer.alloc(width * height * 3);
  let s = seed >>> 0 || 1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      s = (s * 1103515245 + 12345) >>> 0;
      const noise = (s >>> 24) & 31;
      const i = (y * width + x) * 3;
      raw[i] = ((x * 255) / width + noise) & 255;
      raw[i + 1] = ((y * 255) / height + noise) & 255;
      raw[i + 2] = (((x + y) * 127) / (width + height) + noise) & 255;
    }
  }
  return raw;
}

export async function photo(width: number, height: number, format: "jpeg" | "png" = "jpeg", seed = 1): Promise<Uint8Array> {
  const image = sharp(photoPixels(width, height, seed), { raw: { width, height, channels: 3 } });
  return new Uint8Array(format === "jpeg" ? await image.jpeg({ quality: 90 }).toBuffer() : await image.png().toBuffer());
}

/** A flat image of any size, cheap to write and small (a PNG of one colour deflates well). */
export async function flat(width: number, height: number, format: "jpeg" | "png" = "png"): Promise<Uint8Array> {
  const image = sharp({ create: { width, height, channels: 3, background: { r: 40, g: 90, b: 160 } }, limitInputPixels: false });
  return new Uint8Array(format === "jpeg" ? await image.jpeg().toBuffer() : await image.png({ compressionLevel: 9 }).toBuffer());
}

export const QUADRANT_COLOURS = { topLeft: [255, 0, 0], topRight: [0, 255, 0], bottomLeft: [0, 0, 255], bottomRight: [255, 255, 255] } as const;

/**
 * A 64 x 32 image of four flat quadrants (QUADRANT_COLOURS), as a JPEG with the given EXIF
 * orientation, GPS position, XMP description and copyright: what a phone writes.
 */
export async function quadrants(opts: { orientation?: number; secret?: string } = {}): Promise<Uint8Array> {
  const width = 64;
  const height = 32;
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const colour = y < height / 2 ? (x < width / 2 ? QUADRANT_COLOURS.topLeft : QUADRANT_COLOURS.topRight) : x < width / 2 ? QUADRANT_COLOURS.bottomLeft : QUADRANT_COLOURS.bottomRight;
      raw.set(colour, (y * width + x) * 3);
    }
  }
  let image = sharp(raw, { raw: { width, height, channels: 3 } }).jpeg({ quality: 95 });
  if (opts.orientation) image = image.withMetadata({ orientation: opts.orientation });
  if (opts.secret) {
    image = image
      .withExif({ IFD0: { Copyright: `${opts.secret}-copyright`, ImageDescription: `${opts.secret}-comment` }, IFD3: { GPSLatitudeRef: "N", GPSLatitude: "51/1 30/1 26/1", GPSLongitudeRef: "W", GPSLongitude: "0/1 7/1 39/1" } })
      .withXmp(
        `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
          `<rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:description>${opts.secret}-xmp</dc:description></rdf:Description></rdf:RDF></x:xmpmeta>`,
      );
  }
  return new Uint8Array(await image.toBuffer());
}

interface Chunk {
  type: string;
  data: Uint8Array;
}

export function pngChunks(png: Uint8Array): Chunk[] {
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const chunks: Chunk[] = [];
  let at = 8;
  while (at + 12 <= png.length) {
    const length = view.getUint32(at);
    chunks.push({ type: String.fromCharCode(...png.subarray(at + 4, at + 8)), data: png.subarray(at + 8, at + 8 + length) });
    at += 12 + length;
  }
  return chunks;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, "latin1");
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

export function assemblePng(chunks: Chunk[]): Uint8Array {
  return new Uint8Array(Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), ...chunks.map((c) => chunk(c.type, c.data))]));
}

/** A PNG with a tEXt comment chunk after its header. */
export async function pngWithComment(text: string): Promise<Uint8Array> {
  const [ihdr, ...rest] = pngChunks(await photo(32, 24, "png"));
  return assemblePng([ihdr!, { type: "tEXt", data: Buffer.from(`Comment\0${text}`, "latin1") }, ...rest]);
}

/** A two-frame animated PNG (APNG): acTL, then each frame's fcTL and its data (IDAT, then fdAT). */
export async function animatedPng(): Promise<Uint8Array> {
  const width = 16;
  const height = 16;
  const frames = await Promise.all([1, 2].map(async (seed) => pngChunks(await photo(width, height, "png", seed)).filter((c) => c.type === "IDAT")));
  const ihdr = pngChunks(await photo(width, height, "png"))[0]!;
  const u32 = (...values: number[]) => {
    const b = Buffer.alloc(values.length * 4);
    values.forEach((v, i) => b.writeUInt32BE(v, i * 4));
    return b;
  };
  const fctl = (sequence: number) => Buffer.concat([u32(sequence, width, height, 0, 0), Buffer.from([0, 1, 0, 10, 0, 0])]);
  return assemblePng([
    ihdr,
    { type: "acTL", data: u32(2, 0) },
    { type: "fcTL", data: fctl(0) },
    ...frames[0]!,
    { type: "fcTL", data: fctl(1) },
    ...frames[1]!.map((c, i) => ({ type: "fdAT", data: Buffer.concat([u32(2 + i), c.data]) })),
    { type: "IEND", data: new Uint8Array(0) },
  ]);
}

/** The RGB value at (x, y) of a decoded image. */
export async function pixelAt(image: Uint8Array, x: number, y: number): Promise<number[]> {
  const { data, info } = await sharp(image).raw().toBuffer({ resolveWithObject: true });
  const i = (y * info.width + x) * info.channels;
  return [data[i]!, data[i + 1]!, data[i + 2]!];
}
