/**
 * The BERT WordPiece tokenizer of the text encoder (runs in the runtime, next to the model).
 *
 * It gives the ids that HuggingFace `tokenizers` gives for a BERT tokenizer.json such as
 * all-MiniLM-L6-v2's, so that the encoder sees what it was trained on:
 *
 *     const tokenizer = WordPiece.fromJson(readFileSync("tokenizer.json", "utf8"));
 *     tokenizer.encode("Hello world!", 256); // [101, 7592, 2088, 999, 102]
 *
 * The steps are those of `tokenizers`:
 * - the added tokens ("[CLS]", "[MASK]", ...) are found in the raw text and keep their own ids;
 * - BertNormalizer: drop control, format and private-use characters, turn whitespace into spaces,
 *   put spaces around Chinese characters, decompose (NFD) and drop nonspacing marks, lowercase;
 * - BertPreTokenizer: split on whitespace and make each punctuation character a word of its own;
 * - WordPiece: greedy longest-match-first, continuations prefixed with "##"; a word that is too
 *   long or cannot be split into vocabulary pieces becomes one unknown token;
 * - "[CLS] pieces [SEP]", the pieces cut so that the whole fits the maximum.
 *
 * One known difference: `tokenizers` decides what is punctuation, a nonspacing mark or a format
 * character with Unicode 8.0 tables (the unicode_categories crate), while this module uses the
 * runtime's own, newer ones. The ids differ only for text with such characters added since 2015
 * (some rare scripts' punctuation and marks), where one side may split or strip and the other not.
 */

/** The parts of a tokenizer.json that are read; anything else in it is ignored. */
interface TokenizerJson {
  model?: {
    type?: unknown;
    vocab?: unknown;
    unk_token?: unknown;
    continuing_subword_prefix?: unknown;
    max_input_chars_per_word?: unknown;
  };
  normalizer?: {
    type?: unknown;
    clean_text?: unknown;
    handle_chinese_chars?: unknown;
    strip_accents?: unknown;
    lowercase?: unknown;
  } | null;
  pre_tokenizer?: { type?: unknown } | null;
  added_tokens?: {
    id?: unknown;
    content?: unknown;
    normalized?: unknown;
    lstrip?: unknown;
    rstrip?: unknown;
    single_word?: unknown;
  }[];
}

// Removed by clean_text: the control (except \t \n \r), format and private-use characters, the
// replacement character, and lone surrogates (which UTF-8 input to `tokenizers` cannot hold).
const REMOVED = /(?![\t\n\r])[\p{Cc}\p{Cf}\p{Co}\p{Cs}\uFFFD]/gu;
const WHITESPACE = /\p{White_Space}/gu;
// BERT's _is_chinese_char: the CJK Unified Ideographs blocks, not Hangul, Hiragana or Katakana.
const CHINESE =
  /[\u4E00-\u9FFF\u3400-\u4DBF\u{20000}-\u{2A6DF}\u{2A700}-\u{2B73F}\u{2B740}-\u{2B81F}\u{2B920}-\u{2CEAF}\uF900-\uFAFF\u{2F800}-\u{2FA1F}]/gu;
const NONSPACING_MARK = /\p{Mn}/gu;
// All ASCII symbols count as punctuation for BERT ("$", "+", "^", ...), not only Unicode's P*.
const PUNCTUATION = String.raw`\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E\p{P}`;
// A word is one punctuation character or a run of anything but punctuation and whitespace.
const WORD = new RegExp(`[${PUNCTUATION}]|[^${PUNCTUATION}\\p{White_Space}]+`, "gu");

export class WordPiece {
  private constructor(
    private readonly vocab: Map<string, number>,
    /** Splits text around the added tokens (a capturing group, so they stay in the split). */
    private readonly addedSplit: RegExp | null,
    private readonly addedIds: Map<string, number>,
    private readonly unkId: number,
    private readonly clsId: number,
    private readonly sepId: number,
    private readonly prefix: string,
    private readonly maxWordChars: number,
    /** The longest vocabulary entry in code points, which bounds the pieces worth looking up. */
    private readonly maxPieceChars: number,
  ) {}

  /**
   * From the text of a HuggingFace tokenizer.json of a BERT WordPiece tokenizer (throws a clear Error if it is not one).
   *
   * @example
   * const tokenizer = WordPiece.fromJson(await readFile(path, "utf8"));
   */
  static fromJson(text: string): WordPiece {
    let json: TokenizerJson;
    try {
      json = JSON.parse(text) as TokenizerJson;
    } catch {
      throw new Error("tokenizer.json is not valid JSON");
    }
    if (typeof json !== "object" || json === null) throw new Error("tokenizer.json is not a JSON object");

    const { model, normalizer, pre_tokenizer: preTokenizer, added_tokens: addedTokens = [] } = json;
    check(model?.type === "WordPiece", `not a WordPiece tokenizer (model.type is ${JSON.stringify(model?.type)})`);
    check(isRecord(model.vocab), "model.vocab is not an object of token -> id");
    const vocab = new Map<string, number>();
    for (const [token, id] of Object.entries(model.vocab)) {
      check(Number.isInteger(id), `model.vocab gives ${JSON.stringify(token)} the id ${JSON.stringify(id)}`);
      vocab.set(token, id as number);
    }

    // This module implements one normalizer and pre-tokenizer; another would silently change the ids.
    check(
      normalizer?.type === "BertNormalizer" &&
        normalizer.clean_text === true &&
        normalizer.handle_chinese_chars === true &&
        normalizer.lowercase === true &&
        (normalizer.strip_accents === null || normalizer.strip_accents === undefined || normalizer.strip_accents === true),
      "not an uncased BERT tokenizer: normalizer must be BertNormalizer with clean_text, handle_chinese_chars, " +
        "lowercase and accent stripping",
    );
    check(preTokenizer?.type === "BertPreTokenizer", "not a BERT tokenizer: pre_tokenizer must be BertPreTokenizer");

    const addedIds = new Map<string, number>();
    check(Array.isArray(addedTokens), "added_tokens is not an array");
    for (const added of addedTokens) {
      check(
        isRecord(added) && typeof added.content === "string" && added.content !== "" && Number.isInteger(added.id),
        `added token ${JSON.stringify(added)} has no content or id`,
      );
      check(
        added.normalized !== true && added.lstrip !== true && added.rstrip !== true && added.single_word !== true,
        `added token ${JSON.stringify(added.content)} is normalized, stripped or single-word, which is not supported`,
      );
      addedIds.set(added.content, added.id as number);
    }
    // Longest first, so that where two added tokens start at one place the longer wins, as in `tokenizers`.
    const contents = [...addedIds.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
    const addedSplit = contents.length > 0 ? new RegExp(`(${contents.join("|")})`) : null;

    const unk = model.unk_token ?? "[UNK]";
    const prefix = model.continuing_subword_prefix ?? "##";
    const maxWordChars = model.max_input_chars_per_word ?? 100;
    check(typeof prefix === "string", "model.continuing_subword_prefix is not a string");
    check(Number.isInteger(maxWordChars), "model.max_input_chars_per_word is not an integer");
    const idOf = (token: unknown): number => {
      const id = typeof token === "string" ? (addedIds.get(token) ?? vocab.get(token)) : undefined;
      if (id === undefined) throw new Error(`the vocabulary has no ${JSON.stringify(token)} token`);
      return id;
    };
    let maxPieceChars = 0;
    for (const token of vocab.keys()) maxPieceChars = Math.max(maxPieceChars, codePointLength(token));

    return new WordPiece(
      vocab,
      addedSplit,
      addedIds,
      idOf(unk),
      idOf("[CLS]"),
      idOf("[SEP]"),
      prefix,
      maxWordChars as number,
      maxPieceChars,
    );
  }

  /**
   * The ids of "[CLS] <text's word pieces> [SEP]", the pieces cut so that the whole is at most maxTokens long (maxTokens >= 2).
   *
   * @example
   * tokenizer.encode("Hello world!", 4); // [101, 7592, 2088, 102]: "!" did not fit
   */
  encode(text: string, maxTokens: number): number[] {
    if (!Number.isInteger(maxTokens) || maxTokens < 2) {
      throw new RangeError(`maxTokens must be an integer of at least 2 (for [CLS] and [SEP]), not ${maxTokens}`);
    }
    const limit = maxTokens - 2;
    const pieces: number[] = [];
    // Tokenizing stops once the pieces fill the limit: the rest would be cut anyway.
    const segments = this.addedSplit ? text.split(this.addedSplit) : [text];
    for (let i = 0; i < segments.length && pieces.length < limit; i++) {
      // split() puts the added tokens it found at the odd indices.
      if (i % 2 === 1) pieces.push(this.addedIds.get(segments[i]!)!);
      else {
        for (const [word] of normalize(segments[i]!).matchAll(WORD)) {
          this.pushPieces(word, pieces);
          if (pieces.length >= limit) break;
        }
      }
    }
    return [this.clsId, ...pieces.slice(0, limit), this.sepId];
  }

  /** Appends the WordPiece ids of one word: the longest vocabulary piece at each point, else one unknown. */
  private pushPieces(word: string, pieces: number[]): void {
    const chars = Array.from(word);
    if (chars.length > this.maxWordChars) {
      pieces.push(this.unkId);
      return;
    }
    const found: number[] = [];
    for (let start = 0; start < chars.length; ) {
      let end = Math.min(chars.length, start + this.maxPieceChars);
      let id: number | undefined;
      for (; end > start; end--) {
        const piece = chars.slice(start, end).join("");
        id = this.vocab.get(start > 0 ? this.prefix + piece : piece);
        if (id !== undefined) break;
      }
      if (id === undefined) {
        pieces.push(this.unkId);
        return;
      }
      found.push(id);
      start = end;
    }
    pieces.push(...found);
  }
}

/** BertNormalizer with clean_text, handle_chinese_chars, strip_accents and lowercase. */
function normalize(text: string): string {
  return (
    text
      .replace(REMOVED, "")
      .replace(WHITESPACE, " ")
      .replace(CHINESE, " $& ")
      .normalize("NFD")
      .replace(NONSPACING_MARK, "")
      // `tokenizers` lowercases character by character, so a final capital sigma becomes "σ", which
      // toLowerCase() alone would make "ς".
      .replace(/\u03A3/g, "\u03C3")
      .toLowerCase()
  );
}

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`tokenizer.json: ${message}`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function codePointLength(text: string): number {
  let length = 0;
  for (const _ of text) length++;
  return length;
}

function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}
