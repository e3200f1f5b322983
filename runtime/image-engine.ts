/**
 * The image engine of an image runtime (runs in the runtime process on the GPU host, or on a
 * developer machine's CPU): one ONNX image backbone (local/image-backbone.ts: EfficientNet-Lite0,
 * ImageNet-trained) run by ONNX Runtime, answering the pooled features of a canonical PNG.
 *
 * The canonical PNG (8-bit RGB, any size up to LIMITS.imageCanonicalPixels) is scaled to cover the
 * backbone's square input, centred and cropped (ImageNet's evaluation crop), and each channel scaled
 * as (value - 127) / 128, channel first. A 256 x 256 input is 65,536 pixels, the least the processor
 * budget allows; its final feature map is 8 x 8 cells, 64 visual tokens (one per 32 x 32 square of
 * input: runtime-protocol.ts IMAGE_TOKEN_PIXELS), which the features average over.
 *
 * One image at a time, like the text engine's passes; `busyMs` counts the backbone's run only.
 *
 *     const engine = await ImageEngine.load({ modelPath, threads: 2, maxVisualTokens: 4096 });
 *     const { features, visualTokens, inputPixels } = await engine.features(png);
 */
import * as ort from "onnxruntime-node";
import sharp from "sharp";
import { LIMITS } from "../contract/limits.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { IMAGE_TOKEN_PIXELS } from "../server-shared/runtime-protocol.ts";

export interface ImageEngineOptions {
  modelPath: string;
  threads: number;
  /** The most visual tokens one image may need (at most LIMITS.imageVisualTokens). */
  maxVisualTokens: number;
}

export interface ImageFeatures {
  features: number[];
  visualTokens: number;
  inputPixels: number;
}

export class ImageEngine {
  private queue: Promise<unknown> = Promise.resolve();
  private passes = 0;
  private tokens = 0;
  private busyMs = 0;

  private constructor(
    private readonly session: ort.InferenceSession,
    /** The backbone's square input edge, read from the graph. */
    readonly edge: number,
    readonly maxVisualTokens: number,
    readonly description: string,
  ) {}

  static async load(options: ImageEngineOptions): Promise<ImageEngine> {
    const session = await ort.InferenceSession.create(options.modelPath, { intraOpNumThreads: options.threads, interOpNumThreads: 1 });
    const input = session.inputMetadata[0];
    const shape = input && input.isTensor ? input.shape : [];
    const edge = shape[2];
    if (session.inputNames[0] !== "image" || typeof edge !== "number" || shape[3] !== edge || !session.outputNames.includes("features")) {
      throw new Error(`${options.modelPath} is not an image backbone of this service (an input "image" of 1 x 3 x N x N, an output "features")`);
    }
    if (edge * edge < LIMITS.imageInputPixels.min || edge * edge > LIMITS.imageInputPixels.max || edge % IMAGE_TOKEN_PIXELS !== 0) {
      throw new Error(`the backbone's input is ${edge} x ${edge}: outside the processor budget of ${LIMITS.imageInputPixels.min}-${LIMITS.imageInputPixels.max} pixels, or not whole visual tokens`);
    }
    const engine = new ImageEngine(session, edge, options.maxVisualTokens, `onnxruntime-node ${ort.env.versions.common} (cpu)`);
    await engine.evaluate(await sharp({ create: { width: edge, height: edge, channels: 3, background: "#808080" } }).png().toBuffer(), 0);
    engine.passes = engine.tokens = engine.busyMs = 0;
    return engine;
  }

  /**
   * The visual tokens an image costs, whatever its size (the input is always the backbone's
   * square); ServiceError 413 `context_too_large` when that is more than this runtime processes.
   */
  visualTokens(): number {
    const tokens = (this.edge / IMAGE_TOKEN_PIXELS) ** 2;
    if (tokens > this.maxVisualTokens) {
      throw new ServiceError("context_too_large", `the image needs ${tokens} visual tokens; this runtime processes at most ${this.maxVisualTokens}`);
    }
    return tokens;
  }

  features(png: Uint8Array): Promise<ImageFeatures> {
    return this.evaluate(png, this.visualTokens());
  }

  private async evaluate(png: Uint8Array, visualTokens: number): Promise<ImageFeatures> {
    const edge = this.edge;
    let pixels: Buffer;
    try {
      pixels = await sharp(png, { failOn: "error", limitInputPixels: LIMITS.imageCanonicalPixels })
        .resize(edge, edge, { fit: "cover", position: "centre" })
        .removeAlpha()
        .toColourspace("srgb")
        .raw()
        .toBuffer();
    } catch (err) {
      throw new ServiceError("invalid_request", "the image is not a canonical PNG this runtime can read", `decode failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    const planes = new Float32Array(3 * edge * edge);
    const area = edge * edge;
    for (let i = 0; i < area; i++) for (let c = 0; c < 3; c++) planes[c * area + i] = (pixels[i * 3 + c]! - 127) / 128;
    const input = new ort.Tensor("float32", planes, [1, 3, edge, edge]);
    const output = await this.exclusive(async () => {
      const started = performance.now();
      try {
        return await this.session.run({ image: input }, ["features"]);
      } finally {
        this.busyMs += performance.now() - started;
        this.passes += 1;
        this.tokens += visualTokens;
      }
    });
    const features = Array.from(output.features!.data as Float32Array);
    if (!features.every(Number.isFinite)) throw new Error("engine returned non-finite features");
    return { features, visualTokens: (edge / IMAGE_TOKEN_PIXELS) ** 2, inputPixels: area };
  }

  stats(): { passes: number; evaluatedTokens: number; busyMs: number } {
    return { passes: this.passes, evaluatedTokens: this.tokens, busyMs: this.busyMs };
  }

  async dispose(): Promise<void> {
    await this.exclusive(() => this.session.release());
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.queue.then(work, work);
    this.queue = result.catch(() => undefined);
    return result;
  }
}
