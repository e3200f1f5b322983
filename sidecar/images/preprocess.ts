/**
 * An uploaded photo checked and made canonical (runs in the sidecar, with sharp's prebuilt libvips;
 * no decoder of our own). Everything here happens before any GPU work:
 *
 *   1. the format, from the file's first bytes: JPEG or PNG, and the one its filename's extension names;
 *   2. the PNG's chunk structure (not its pixels): an `acTL` chunk is an animation, a missing `IEND`
 *      a truncated file;
 *   3. the header's size, read without decoding: at most LIMITS.imageEdgePixels along an edge and
 *      LIMITS.imagePixels in all, so a decompression bomb is refused before it is inflated;
 *   4. the full decode (libvips' `failOn: "error"`: a truncated or corrupt stream fails), EXIF
 *      orientation applied, alpha flattened onto white, converted to 8-bit sRGB, scaled down to at
 *      most LIMITS.imageCanonicalPixels, written as a PNG of three chunks: IHDR, IDAT, IEND (no
 *      metadata block at all, not even the pixel density libvips adds).
 *
 *     const result = await preprocessImage(bytes, "jpeg");
 *     if (!result.ok) -> 422 result.code ("image_truncated", ...), result.message
 *     else result.png, result.source {format, width, height}, result.canonical {width, height, bytes, sha256}
 */
import sharp from "sharp";
import { IMAGE_REFUSALS, type CanonicalImage, type ImageFormat, type ImageRefusal } from "../../contract/images.ts";
import { LIMITS } from "../../contract/limits.ts";
import { sha256Hex } from "../../server-shared/crypto.ts";

// libvips' operation cache keeps decoded images for reuse; a sidecar sees each image once.
sharp.cache(false);

export type Preprocessed =
  | { ok: true; png: Uint8Array; source: { format: ImageFormat; width: number; height: number }; canonical: CanonicalImage }
  | { ok: false; code: ImageRefusal; message: string };

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

function refused(code: ImageRefusal, detail?: string): Preprocessed {
  return { ok: false, code, message: detail ? `${IMAGE_REFUSALS[code]}: ${detail}` : IMAGE_REFUSALS[code] };
}

/** The format the bytes are, by their signature, or null. */
export function sniffFormat(bytes: Uint8Array): ImageFormat | null {
  if (PNG_SIGNATURE.every((b, i) => bytes[i] === b)) return "png";
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "jpeg";
  return null;
}

/** A PNG's chunk walk: "animated" (an acTL chunk), "truncated" (no IEND before the end), or null. */
function pngStructure(bytes: Uint8Array): "animated" | "truncated" | null {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = PNG_SIGNATURE.length;
  while (at + 8 <= bytes.length) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(bytes[at + 4]!, bytes[at + 5]!, bytes[at + 6]!, bytes[at + 7]!);
    if (type === "acTL") return "animated";
    const end = at + 12 + length;
    if (end > bytes.length) return "truncated";
    if (type === "IEND") return null;
    at = end;
  }
  return "truncated";
}

/** A PNG with every chunk but IHDR, IDAT and IEND dropped (their bytes, CRCs included, copied as they are). */
export function imageChunksOnly(png: Uint8Array): Uint8Array<ArrayBuffer> {
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const kept: Uint8Array[] = [png.subarray(0, PNG_SIGNATURE.length)];
  let at = PNG_SIGNATURE.length;
  while (at + 12 <= png.length) {
    const end = at + 12 + view.getUint32(at);
    const type = String.fromCharCode(png[at + 4]!, png[at + 5]!, png[at + 6]!, png[at + 7]!);
    if (type === "IHDR" || type === "IDAT" || type === "IEND") kept.push(png.subarray(at, end));
    at = end;
  }
  const out = new Uint8Array(kept.reduce((n, part) => n + part.byteLength, 0));
  let offset = 0;
  for (const part of kept) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

/** Whether a JPEG ends with its end-of-image marker (trailing zero padding allowed). */
function jpegHasEnd(bytes: Uint8Array): boolean {
  let end = bytes.length;
  while (end > 2 && bytes[end - 1] === 0) end--;
  return bytes[end - 2] === 0xff && bytes[end - 1] === 0xd9;
}

export async function preprocessImage(bytes: Uint8Array, declared: ImageFormat): Promise<Preprocessed> {
  const format = sniffFormat(bytes);
  if (format === null) return refused("image_unsupported");
  if (format !== declared) return refused("image_type_mismatch", `the file is a ${format === "png" ? "PNG" : "JPEG"}, its name says ${declared === "png" ? "PNG" : "JPEG"}`);
  if (format === "png") {
    const structure = pngStructure(bytes);
    if (structure === "animated") return refused("image_animated");
    if (structure === "truncated") return refused("image_truncated");
  }

  let header: sharp.Metadata;
  try {
    // The header only: nothing is decoded yet.
    header = await sharp(bytes, { failOn: "none", limitInputPixels: false }).metadata();
  } catch {
    return format === "jpeg" && !jpegHasEnd(bytes) ? refused("image_truncated") : refused("image_undecodable");
  }
  const { width, height } = header;
  if (!width || !height) return refused("image_undecodable");
  if ((header.pages ?? 1) > 1) return refused("image_animated");
  if (width > LIMITS.imageEdgePixels || height > LIMITS.imageEdgePixels) {
    return refused("image_too_large", `${width} x ${height} pixels; each edge holds at most ${LIMITS.imageEdgePixels}`);
  }
  if (width * height > LIMITS.imagePixels) {
    return refused("image_too_large", `${width} x ${height} = ${width * height} pixels; at most ${LIMITS.imagePixels}`);
  }

  // EXIF orientations 5 to 8 turn the image a quarter: the upright size swaps its edges.
  const quarterTurn = (header.orientation ?? 1) >= 5;
  const upright = quarterTurn ? { width: height, height: width } : { width, height };
  const scale = Math.min(1, Math.sqrt(LIMITS.imageCanonicalPixels / (upright.width * upright.height)));
  let pipeline = sharp(bytes, { failOn: "error", limitInputPixels: LIMITS.imagePixels })
    .rotate()
    .flatten({ background: "#ffffff" })
    .toColourspace("srgb");
  if (scale < 1) {
    pipeline = pipeline.resize({
      width: Math.max(1, Math.floor(upright.width * scale)),
      height: Math.max(1, Math.floor(upright.height * scale)),
      fit: "inside",
      withoutEnlargement: true,
    });
  }
  let out: { data: Buffer; info: sharp.OutputInfo };
  try {
    out = await pipeline.png({ compressionLevel: 6 }).toBuffer({ resolveWithObject: true });
  } catch {
    return format === "jpeg" && !jpegHasEnd(bytes) ? refused("image_truncated") : refused("image_undecodable");
  }
  if (out.info.channels !== 3) throw new Error(`canonical image has ${out.info.channels} channels, expected 3`);
  if (out.data.byteLength > LIMITS.imageCanonicalBytes) throw new Error(`canonical PNG is ${out.data.byteLength} bytes, over ${LIMITS.imageCanonicalBytes}`);
  // libvips writes a pHYs chunk (pixel density): metadata too. Only the image's own chunks are kept.
  const png = imageChunksOnly(new Uint8Array(out.data));
  return {
    ok: true,
    png,
    source: { format, ...upright },
    canonical: { width: out.info.width, height: out.info.height, bytes: png.byteLength, sha256: await sha256Hex(png) },
  };
}
