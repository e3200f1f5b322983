import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ensureTextEncoder } from "../local/text-encoder.ts";
import { WordPiece } from "./wordpiece.ts";

// The ids in the fixture are HuggingFace `tokenizers`' own for all-MiniLM-L6-v2's tokenizer.json
// (see test/fixtures/wordpiece-cases.py for how they were made).
const cases = JSON.parse(
  readFileSync(new URL("../test/fixtures/wordpiece-cases.json", import.meta.url), "utf8"),
) as { text: string; maxTokens: number; ids: number[] }[];

// The real vocabulary, installed and checked against its SHA-256 as the runtime's is.
const tokenizerJson = readFileSync((await ensureTextEncoder()).tokenizerPath, "utf8");
const tokenizer = WordPiece.fromJson(tokenizerJson);

const CLS = 101;
const SEP = 102;
const UNK = 100;

/** The tokenizer.json with some of its parts replaced, to see what fromJson accepts. */
function variant(change: (json: Record<string, unknown>) => void): string {
  const json = JSON.parse(tokenizerJson) as Record<string, unknown>;
  change(json);
  return JSON.stringify(json);
}

describe("WordPiece.encode", () => {
  describe("gives the ids of HuggingFace tokenizers", () => {
    for (const { text, maxTokens, ids } of cases) {
      it(`${JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text)} (at most ${maxTokens})`, () => {
        expect(tokenizer.encode(text, maxTokens)).toEqual(ids);
      });
    }
  });

  it("is compared on the cases that matter", () => {
    // Guards the fixture against being cut down to the easy cases.
    expect(cases.length).toBeGreaterThanOrEqual(60);
    expect(cases.some((c) => c.maxTokens === 256 && c.ids.length === 256)).toBe(true);
    expect(cases.filter((c) => c.maxTokens === 16 && c.ids.length === 16)).toHaveLength(3);
    expect(cases.some((c) => c.text === "")).toBe(true);
  });

  it("wraps the pieces in [CLS] and [SEP]", () => {
    expect(tokenizer.encode("", 256)).toEqual([CLS, SEP]);
    expect(tokenizer.encode("hello", 256)).toEqual([CLS, 7592, SEP]);
  });

  it("cuts the pieces so that the whole, [CLS] and [SEP] included, fits the maximum", () => {
    const text = "the quick brown fox jumps over the lazy dog";
    const all = tokenizer.encode(text, 256);
    expect(all).toHaveLength(11);
    for (let max = 2; max <= 12; max++) {
      const ids = tokenizer.encode(text, max);
      expect(ids).toEqual([...all.slice(0, Math.min(max, 11) - 1), SEP]);
    }
  });

  it("cuts between the pieces of a word", () => {
    // "unaffordable" is "una", "##ff", "##ord", "##able".
    expect(tokenizer.encode("unaffordable", 4)).toEqual([CLS, 14477, 4246, SEP]);
  });

  it("rejects a maximum below 2 or not an integer", () => {
    for (const max of [1, 0, -1, 2.5, Number.NaN]) {
      expect(() => tokenizer.encode("hello", max)).toThrow(RangeError);
    }
  });

  it("makes a word of more than 100 characters, or one it cannot split, one unknown token", () => {
    expect(tokenizer.encode("a".repeat(101), 256)).toEqual([CLS, UNK, SEP]);
    expect(tokenizer.encode(`${"a".repeat(100)} ok`, 256).at(-2)).toBe(7929);
    expect(tokenizer.encode("a\u{1F60D}b", 256)).toEqual([CLS, UNK, SEP]);
  });

  it("drops lone surrogates as `tokenizers` drops the replacement character they become in UTF-8", () => {
    expect(tokenizer.encode("a\uD800b c\uDFFF", 256)).toEqual(tokenizer.encode("ab c", 256));
  });

  it("lowercases a final capital sigma as a plain sigma", () => {
    expect(tokenizer.encode("ΟΔΥΣ", 256)).toEqual(tokenizer.encode("οδυσ", 256));
    expect(tokenizer.encode("ΟΔΥΣ", 256)).not.toEqual(tokenizer.encode("οδυς", 256));
  });
});

describe("WordPiece.fromJson", () => {
  it("rejects text that is not JSON", () => {
    expect(() => WordPiece.fromJson("not json")).toThrow("tokenizer.json is not valid JSON");
    expect(() => WordPiece.fromJson("[]")).toThrow(/not a WordPiece tokenizer/);
  });

  it("rejects a tokenizer of another model", () => {
    const bpe = JSON.stringify({
      version: "1.0",
      normalizer: null,
      pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
      model: { type: "BPE", vocab: { a: 0, b: 1, ab: 2 }, merges: [["a", "b"]] },
    });
    expect(() => WordPiece.fromJson(bpe)).toThrow('tokenizer.json: not a WordPiece tokenizer (model.type is "BPE")');
  });

  it("rejects a WordPiece tokenizer that normalizes or splits text otherwise", () => {
    const cased = variant((json) => {
      json.normalizer = { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: false };
    });
    expect(() => WordPiece.fromJson(cased)).toThrow(/not an uncased BERT tokenizer/);
    const whitespace = variant((json) => {
      json.pre_tokenizer = { type: "Whitespace" };
    });
    expect(() => WordPiece.fromJson(whitespace)).toThrow(/pre_tokenizer must be BertPreTokenizer/);
  });

  it("rejects a vocabulary without the tokens it needs", () => {
    const noSep = variant((json) => {
      const model = json.model as { vocab: Record<string, number> };
      delete model.vocab["[SEP]"];
      json.added_tokens = (json.added_tokens as { content: string }[]).filter((t) => t.content !== "[SEP]");
    });
    expect(() => WordPiece.fromJson(noSep)).toThrow('the vocabulary has no "[SEP]" token');
  });
});
