/**
 * Per-item features for the training probe, extracted in process with node-llama-cpp on the default
 * model (CPU here), cached as JSON lines under the cache folder so that reruns only add what is missing.
 *
 * Two kinds, one forward pass each:
 * - `prompt`: the decision rendered exactly as the served readout renders its first content pass
 *   (render.ts planQuestion, SERVED_RENDERING), evaluated once; from that one pass comes the final
 *   hidden state at the answer position (the last prompt token, after the final norm: what llama.cpp
 *   returns as an embedding with pooling NONE). The labels' scores are computed from it: Gemma 3 ties
 *   its output layer to the token embeddings (Q8_0 in this GGUF), so a label form's logit is the dot
 *   product of the hidden state with that token's embedding row, read from the GGUF file. A label's
 *   score is the log-sum-exp of its forms' logits: its log-probability up to a constant shared by all
 *   labels of the pass (so a softmax over labels gives execute.ts's distribution for that one pass,
 *   without its content-free pass and second option order). Asking llama.cpp for the full 262k-token
 *   distribution instead cost about 40 % more time per pass on this CPU.
 * - `mean`: the state text alone through an embedding context whose model has its GGUF pooling type
 *   overridden to MEAN (`metadataOverrides: { gemma3: { pooling_type: 1 } }`): a pooled embedding.
 *
 *     const extractor = await Extractor.load(modelPath, threads);
 *     const f = await extractor.prompt(task, item);   // { hidden, logprobs, tokens, ms }
 */
import { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { getLlama, readGgufFileInfo, type ControlledEvaluateInputItem, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaEmbeddingContext, type LlamaModel, type Token } from "node-llama-cpp";
import { planQuestion, SERVED_RENDERING, wordCandidates, type Pass } from "../../sidecar/decide/render.ts";
import type { ProbeItem, Task } from "./data.ts";

export interface PromptFeatures {
  id: string;
  hidden: number[];
  /** Per label, log-sum-exp of its forms' logits (a log-probability up to a shared constant). */
  scores: number[];
  tokens: number;
  ms: number;
}

export interface MeanFeatures {
  id: string;
  mean: number[];
  tokens: number;
  ms: number;
}

const round = (v: ArrayLike<number>) => Array.from(v, (x) => Math.fround(x));

/** A JSON-lines cache of one feature kind, keyed by item id. */
export class FeatureCache<T extends { id: string }> {
  readonly entries = new Map<string, T>();
  private readonly file: string;
  constructor(dir: string, name: string) {
    mkdirSync(dir, { recursive: true });
    this.file = join(dir, `${name}.jsonl`);
    if (existsSync(this.file)) {
      for (const line of readFileSync(this.file, "utf8").split("\n")) {
        if (!line.trim()) continue;
        try {
          const entry = JSON.parse(line) as T;
          this.entries.set(entry.id, entry);
        } catch {
          // a line cut short by a stopped run: extracted again
        }
      }
    }
  }
  get(id: string): T | undefined {
    return this.entries.get(id);
  }
  put(entry: T): void {
    this.entries.set(entry.id, entry);
    appendFileSync(this.file, JSON.stringify(entry) + "\n");
  }
}

function f16(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 31) return fraction ? Number.NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/** Rows of the GGUF's token embedding matrix (Q8_0: blocks of an f16 scale and 32 int8 values), read on demand. */
export class TokenRows {
  private readonly rows = new Map<number, Float64Array>();
  private constructor(
    private readonly path: string,
    private readonly start: number,
    private readonly width: number,
  ) {}

  static async open(path: string): Promise<TokenRows> {
    const info = await readGgufFileInfo(path);
    const tensor = info.fullTensorInfo?.find((t) => t.name === "token_embd.weight");
    if (!tensor || tensor.ggmlType !== 8) throw new Error("expected a Q8_0 token_embd.weight (the tied output layer)");
    const alignment = Number((info.metadata.general as { alignment?: number }).alignment ?? 32);
    if (info.infoEndOffset === undefined) throw new Error("the GGUF's tensor data offset is unknown");
    const dataStart = Math.ceil(info.infoEndOffset / alignment) * alignment;
    return new TokenRows(path, dataStart + Number(tensor.offset), Number(tensor.dimensions[0]));
  }

  row(token: number): Float64Array {
    let row = this.rows.get(token);
    if (row) return row;
    const blocks = this.width / 32;
    const bytes = Buffer.alloc(blocks * 34);
    const fd = openSync(this.path, "r");
    try {
      readSync(fd, bytes, 0, bytes.length, this.start + token * bytes.length);
    } finally {
      closeSync(fd);
    }
    row = new Float64Array(this.width);
    for (let b = 0; b < blocks; b++) {
      const scale = f16(bytes.readUInt16LE(b * 34));
      for (let i = 0; i < 32; i++) row[b * 32 + i] = scale * bytes.readInt8(b * 34 + 2 + i);
    }
    this.rows.set(token, row);
    return row;
  }

  logit(hidden: ArrayLike<number>, token: number): number {
    const row = this.row(token);
    let sum = 0;
    for (let i = 0; i < row.length; i++) sum += row[i]! * hidden[i]!;
    return sum;
  }
}

const logSumExp = (xs: number[]) => {
  const m = Math.max(...xs);
  return m + Math.log(xs.reduce((s, x) => s + Math.exp(x - m), 0));
};

export class Extractor {
  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequence: LlamaContextSequence,
    private readonly meanModel: LlamaModel,
    private readonly meanContext: LlamaEmbeddingContext,
    private readonly rows: TokenRows,
  ) {}

  static async load(modelPath: string, threads: number): Promise<Extractor> {
    const llama = await getLlama({ gpu: false, build: "never", progressLogs: false });
    const model = await llama.loadModel({ modelPath });
    // `_embeddings` is node-llama-cpp's internal context option (what createEmbeddingContext sets): with
    // it, the same pass that yields the next-token distribution also keeps the last hidden state.
    const context = await model.createContext({ contextSize: 2048, sequences: 1, threads, _embeddings: true } as Parameters<LlamaModel["createContext"]>[0]);
    const meanModel = await llama.loadModel({ modelPath, metadataOverrides: { gemma3: { pooling_type: 1 } } as never });
    const meanContext = await meanModel.createEmbeddingContext({ contextSize: 2048, threads });
    return new Extractor(llama, model, context, context.getSequence(), meanModel, meanContext, await TokenRows.open(modelPath));
  }

  /** The served rendering's first content pass for `item` (words when every first token is distinct, as admission decides). */
  servedPass(task: Task, item: ProbeItem): Pass {
    const question = [...item.item.questions.values()][0]!;
    const candidates = wordCandidates(SERVED_RENDERING, question);
    let words = false;
    if (candidates) {
      const first = candidates.map((w) => this.model.tokenize(w, false)[0]);
      const pieces = first.map((t) => (t === undefined ? "" : this.model.detokenize([t], true)));
      words = new Set(first).size === first.length && pieces.every((p) => p.trim().length > 0);
    }
    const stateText = typeof item.item.state === "string" ? item.item.state : JSON.stringify(item.item.state);
    const plan = planQuestion(SERVED_RENDERING, stateText, question, { words, contextual: false, bothOrders: false });
    void task;
    const pass = plan.readings[0]!.pass;
    return words ? { ...pass, labels: pass.labels.map((forms) => [forms[0]!]) } : pass;
  }

  /** The token read for a label form: its only token (fixed forms), or its first (word labels). */
  private labelToken(form: string): Token {
    return this.model.tokenize(form, false)[0]!;
  }

  async prompt(task: Task, item: ProbeItem): Promise<PromptFeatures> {
    const pass = this.servedPass(task, item);
    const bos = this.model.tokens.bos;
    const tokens = [...(bos === null ? [] : [bos]), ...pass.segments.flatMap((s) => this.model.tokenize(s.text, s.special))] as Token[];
    const started = performance.now();
    await this.sequence.clearHistory();
    const last = tokens.length - 1;
    // The last token flagged as an output (one greedy token, which is not used): llama.cpp keeps its hidden state.
    const input = tokens.map((token, i): ControlledEvaluateInputItem => (i === last ? [token, { generateNext: { token: true, options: { temperature: 0 } } }] : token));
    await this.sequence.controlledEvaluate(input);
    const hidden = (this.context as unknown as { _ctx: { getEmbedding(n: number): Float64Array } })._ctx.getEmbedding(tokens.length);
    const ms = performance.now() - started;
    const scores = pass.labels.map((forms) => logSumExp(forms.map((form) => this.rows.logit(hidden, this.labelToken(form)))));
    return { id: item.id, hidden: round(hidden), scores, tokens: tokens.length, ms };
  }

  async mean(item: ProbeItem): Promise<MeanFeatures> {
    const text = typeof item.item.state === "string" ? item.item.state : JSON.stringify(item.item.state);
    const started = performance.now();
    const embedding = await this.meanContext.getEmbeddingFor(text);
    const ms = performance.now() - started;
    return { id: item.id, mean: round(embedding.vector), tokens: this.meanContext.calculateInputLength(text), ms };
  }

  async dispose(): Promise<void> {
    await this.meanContext.dispose();
    await this.context.dispose();
    await this.meanModel.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }
}
