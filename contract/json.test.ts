import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { JsonError, parseJson, stringifyJson, type Json } from "./json.ts";

/** Plain JSON text of any shape, keys included that plain objects reorder or treat specially. */
const key = fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom("__proto__", "constructor", "2", "10", "0", "-1", "01", "toString"));
const value: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.string({ unit: "grapheme" }).filter((s) => !s.includes("\u0000")),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.uniqueArray(fc.tuple(key, tie("value")), { maxLength: 4, selector: ([k]) => k }).map((entries) => new Map(entries)),
  ),
})).value;

function refusal(text: string): JsonError {
  try {
    parseJson(text, { maxDepth: 32 });
  } catch (err) {
    expect(err).toBeInstanceOf(JsonError);
    return err as JsonError;
  }
  throw new Error(`accepted: ${text}`);
}

describe("parseJson and stringifyJson", () => {
  it("round-trip any JSON text, every key in document order", () => {
    fc.assert(
      fc.property(value, (v) => {
        const text = stringifyJson(v);
        expect(stringifyJson(parseJson(text))).toBe(text);
        // The same values JSON.parse reads, where plain objects can hold them.
        expect(JSON.stringify(JSON.parse(text))).toBe(JSON.stringify(JSON.parse(stringifyJson(parseJson(text)))));
      }),
      { numRuns: 500 },
    );
  });

  it("keeps integer-like and __proto__ keys as data, in order", () => {
    const parsed = parseJson('{"b":1,"2":2,"__proto__":{"x":1},"1":3}') as Map<string, Json>;
    expect([...parsed.keys()]).toEqual(["b", "2", "__proto__", "1"]);
    expect(parsed.get("__proto__")).toEqual(new Map([["x", 1]]));
    expect(stringifyJson(parsed)).toBe('{"b":1,"2":2,"__proto__":{"x":1},"1":3}');
  });

  it("writes plain objects and Maps alike, leaving undefined members out", () => {
    expect(stringifyJson({ a: [1, undefined, "x"], b: undefined, c: new Map([["z", null]]) })).toBe('{"a":[1,null,"x"],"c":{"z":null}}');
    expect(stringifyJson(JSON.parse('{"__proto__":1}'))).toBe('{"__proto__":1}');
  });

  it("refuses what JSON.parse refuses", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 12 }), (text) => {
        let plain = true;
        try {
          JSON.parse(text);
        } catch {
          plain = false;
        }
        // Refused too; the reason is the first problem from the left, which may be a stricter rule
        // of this parser ("1E310:" overflows before its ":" is reached, "\u0000" before its end).
        if (!plain) expect(refusal(text).reason).toMatch(/^(syntax|number|nul|surrogate)$/);
      }),
      { numRuns: 2000 },
    );
    for (const text of ["", "{", '{"a" 1}', "[1,]", "01", "1.", '"\\x"', '"\t"', "tru", "nul", "{}x", '{"a":1,}', "-", "+1", ".5"]) {
      expect(refusal(text).reason).toBe("syntax");
    }
  });

  it("refuses a key repeated in one object, naming where", () => {
    const err = refusal('{"questions":{"q":{"type":"noul"},"q":{"type":"score"}}}');
    expect(err.reason).toBe("duplicate_key");
    expect(err.path).toBe("questions");
    expect(parseJson('[{"a":1},{"a":2}]')).toEqual([new Map([["a", 1]]), new Map([["a", 2]])]);
  });

  it("refuses U+0000 in any string or key, and unpaired surrogates", () => {
    expect(refusal('{"model":"a\\u0000b"}')).toMatchObject({ reason: "nul", path: "model" });
    expect(refusal('{"a\\u0000":1}').reason).toBe("nul");
    expect(refusal('["\\ud800"]')).toMatchObject({ reason: "surrogate", path: "0" });
    expect(refusal('"\\udc00x"').reason).toBe("surrogate");
    expect(refusal('"\ud800"').reason).toBe("surrogate");
    expect(parseJson('"\\ud83d\\ude00"')).toBe("😀");
  });

  it("refuses nesting past maxDepth and numbers past float range", () => {
    expect(parseJson(`${"[".repeat(32)}${"]".repeat(32)}`, { maxDepth: 32 })).toBeDefined();
    expect(refusal(`${"[".repeat(33)}${"]".repeat(33)}`).reason).toBe("depth");
    expect(() => parseJson("[".repeat(100_000))).toThrow(JsonError);
    expect(refusal("1e400").reason).toBe("number");
  });
});
