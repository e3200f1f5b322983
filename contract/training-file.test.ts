import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LIMITS } from "./limits.ts";
import { validateTrainingFile } from "./training-file.ts";

const MIN = LIMITS.trainingExamplesPerOutcome;
const QUESTIONS = {
  refund: { type: "noul", instructions: "Does the customer want money back?" },
  team: { type: "choice", criteria: { billing: null, shipping: "parcels", tech: null } },
};
const TEAMS = ["billing", "shipping", "tech"] as const;

/** Example i of a file that trains both questions, every outcome MIN times or more. */
function example(i: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    custom_id: `t-${i}`,
    body: { state: { mail: `mail number ${i}` }, questions: QUESTIONS },
    labels: { refund: i % 2 === 0, team: TEAMS[i % 3] },
    ...overrides,
  };
}

const COUNT = 6 * MIN;
const file = (lines: unknown[]) => new TextEncoder().encode(lines.map((line) => (typeof line === "string" ? line : JSON.stringify(line))).join("\n") + "\n");
const good = (n = COUNT) => Array.from({ length: n }, (_, i) => example(i));
/** A good file with line `at` (1-based) replaced. */
const withLine = (at: number, line: unknown) => good().map((l, i) => (i + 1 === at ? line : l));

function refusal(bytes: Uint8Array): { code: string; message: string; line: number | null } {
  const checked = validateTrainingFile(bytes);
  if (checked.ok) throw new Error("the file was accepted");
  return checked.error;
}

describe("validateTrainingFile", () => {
  it("accepts a file of one task: the first line's questions and base, each example's state and true outcomes", () => {
    const checked = validateTrainingFile(file(good()));
    if (!checked.ok) throw new Error(checked.error.message);
    expect(checked.task.model).toBe("svc-shared");
    expect([...checked.task.questions.keys()]).toEqual(["refund", "team"]);
    expect(checked.examples).toHaveLength(COUNT);
    expect(checked.examples[0]).toEqual({ line: 1, customId: "t-0", state: '{"mail":"mail number 0"}', outcomes: [0, 0], assetId: null });
    expect(checked.examples[4]!.outcomes).toEqual([0, 1]); // true, shipping
    expect(checked.examples[5]!.outcomes).toEqual([1, 2]); // false, tech
  });

  it("takes score labels as zero-based levels and CRLF line ends", () => {
    const levels = ["none", "minor", "major"];
    const lines = Array.from({ length: 3 * MIN }, (_, i) => ({ custom_id: `s${i}`, body: { state: `s ${i}`, questions: { sev: { type: "score", criteria: levels } } }, labels: { sev: i % 3 } }));
    const text = lines.map((l) => JSON.stringify(l)).join("\r\n") + "\r\n";
    const checked = validateTrainingFile(new TextEncoder().encode(text));
    expect(checked.ok && checked.examples.map((e) => e.outcomes[0]).slice(0, 4)).toEqual([0, 1, 2, 0]);
  });

  it.each<[string, unknown, string, RegExp]>([
    ["malformed JSON", '{"custom_id": "x", "body": ', "invalid_jsonl", /^line 3: /],
    ["U+0000, escaped", JSON.stringify(example(2)).replace("mail number", "mail\\u0000number"), "nul_character", /^line 3: /],
    ["a body the real-time route refuses (no questions)", example(2, { body: { state: "s" } }), "invalid_example", /^line 3: body: /],
    ["a body with images", example(2, { body: { state: "s", questions: QUESTIONS, images: [] } }), "invalid_example", /images/],
    ["a body over the request's token bound", example(2, { body: { state: "x".repeat(LIMITS.reservedInputTokensPerRequest * 2), questions: QUESTIONS } }), "invalid_example", /input tokens/],
    ["an example without labels", { custom_id: "x", body: example(2).body }, "invalid_example", /labels/],
    ["an unknown field", { ...example(2), weight: 2 }, "invalid_example", /unknown field/],
    ["another question's instructions", example(2, { body: { state: "s", questions: { ...QUESTIONS, refund: { type: "noul", instructions: "Other?" } } } }), "task_mismatch", /question "refund" is not asked as on the first line/],
    ["the questions in another order", example(2, { body: { state: "s", questions: { team: QUESTIONS.team, refund: QUESTIONS.refund } } }), "task_mismatch", /question ids are \["team","refund"\]/],
    ["another base model", example(2, { body: { model: "other", state: "s", questions: QUESTIONS } }), "task_mismatch", /every example trains the same base/],
    ["an unknown option", example(2, { labels: { refund: true, team: "sales" } }), "invalid_label", /labels\.team: a choice question's label must be one of its option names/],
    ["a noul label that is not a boolean", example(2, { labels: { refund: "yes", team: "tech" } }), "invalid_label", /true or false/],
    ["a missing label", example(2, { labels: { refund: true } }), "invalid_label", /question "team" has no label/],
    ["a label for no question", example(2, { labels: { refund: true, team: "tech", extra: 1 } }), "invalid_label", /"extra" is not a question of the task/],
    ["a __proto__ label", `{"custom_id":"p","body":${JSON.stringify(example(2).body)},"labels":{"refund":true,"team":"tech","__proto__":true}}`, "invalid_label", /"__proto__" is not a question/],
    ["labels that are not an object", example(2, { labels: [true, "tech"] }), "invalid_label", /labels must be a JSON object/],
    ["a duplicate custom_id", example(2, { custom_id: "t-0" }), "duplicate_custom_id", /also on line 1/],
  ])("refuses %s, naming the line", (_, line, code, message) => {
    const error = refusal(file(withLine(3, line)));
    expect(error).toMatchObject({ code, line: 3 });
    expect(error.message).toMatch(message);
  });

  it("refuses a score level out of range", () => {
    const lines = Array.from({ length: 2 * MIN }, (_, i) => ({ custom_id: `s${i}`, body: { state: "s", questions: { sev: { type: "score", criteria: ["low", "high"] } } }, labels: { sev: i === 4 ? 2 : i % 2 } }));
    expect(refusal(file(lines))).toMatchObject({ code: "invalid_label", line: 5, message: expect.stringMatching(/a level from 0 to 1/) });
  });

  it("refuses a file with too few examples of an outcome, naming the question and the outcome", () => {
    // Every mail is for billing or tech: shipping has none.
    const lines = good().map((l, i) => ({ ...l, labels: { refund: i % 2 === 0, team: i % 2 === 0 ? "billing" : "tech" } }));
    expect(refusal(file(lines))).toEqual({
      code: "too_few_examples",
      message: `question "team": 0 example(s) of "shipping"; every outcome needs at least ${MIN}`,
      line: null,
    });
    expect(refusal(file(good(2 * MIN)))).toMatchObject({ code: "too_few_examples" });
  });

  it("refuses files outside the published bounds, and the file-level faults every upload shares", () => {
    expect(refusal(new Uint8Array(LIMITS.trainingFileBytes + 1))).toMatchObject({ code: "file_too_large", line: null });
    expect(refusal(file(Array.from({ length: LIMITS.trainingFileExamples + 1 }, (_, i) => example(i))))).toMatchObject({ code: "too_many_records", line: LIMITS.trainingFileExamples + 1 });
    expect(refusal(new TextEncoder().encode("\n \n"))).toMatchObject({ code: "empty_file", line: null });
    expect(refusal(file(withLine(2, "")))).toMatchObject({ code: "invalid_jsonl", line: 2 });
    const bytes = file(good());
    bytes[bytes.indexOf(0x6d)] = 0xff; // the first "m" of line 1 ("mail") becomes an invalid UTF-8 byte
    expect(refusal(bytes)).toMatchObject({ code: "invalid_utf8", line: 1 });
  });

  it("answers any bytes with a file or an error naming a line in the file, never a throw", () => {
    const codes = new Set(["file_too_large", "empty_file", "too_many_records", "invalid_jsonl", "invalid_utf8", "nul_character", "invalid_example", "duplicate_custom_id", "task_mismatch", "invalid_label", "too_few_examples"]);
    const line = fc.oneof(
      fc.constantFrom(...good(3).map((l) => JSON.stringify(l))),
      fc.json(),
      fc.string(),
      fc.record({ custom_id: fc.string(), body: fc.jsonValue(), labels: fc.jsonValue() }).map((l) => JSON.stringify(l)),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 12 }), fc.uint8Array({ maxLength: 8 }), (lines, tail) => {
        const bytes = new Uint8Array([...new TextEncoder().encode(lines.join("\n")), ...tail]);
        const checked = validateTrainingFile(bytes);
        if (checked.ok) return;
        expect(codes).toContain(checked.error.code);
        if (checked.error.line !== null) expect(checked.error.line).toBeGreaterThanOrEqual(1);
      }),
      { numRuns: 300 },
    );
  });

  describe("an image training file", () => {
    const DIGIT = { digit: { type: "choice", criteria: { zero: null, one: "a single stroke" } } };
    const asset = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
    /** Image example i: zero, one, or an image of neither (null), each MIN times or more. */
    const imageExample = (i: number, body: Record<string, unknown> = {}, label: unknown = [null, "zero", "one"][i % 3]) => ({
      custom_id: `i-${i}`,
      body: { model: "svc-image", state: "", images: [{ asset_id: asset(i) }], questions: DIGIT, ...body },
      labels: { digit: label },
    });
    const images = (n = 3 * MIN) => Array.from({ length: n }, (_, i) => imageExample(i));

    it("is told by its first line's image: a label names an answer, or null for an image of none of them (the outcome after the answers)", () => {
      const checked = validateTrainingFile(file(images()));
      if (!checked.ok) throw new Error(checked.error.message);
      expect(checked.task).toMatchObject({ model: "svc-image", modality: "image" });
      expect(checked.examples.slice(0, 3).map((e) => [e.outcomes, e.assetId])).toEqual([
        [[2], asset(0)],
        [[0], asset(1)],
        [[1], asset(2)],
      ]);
    });

    it.each<[string, unknown, string, RegExp]>([
      ["a line without an image", example(2), "task_mismatch", /all text or all images/],
      ["an image named by a URL", imageExample(2, { images: [{ asset_id: "https://example.com/a.png" }] }), "invalid_example", /asset_id: name an image by the id of a finalized image asset.*URLs and encoded images/],
      ["an image as base64", imageExample(2, { images: [{ asset_id: "data:image/png;base64,iVBORw0KGgo=" }] }), "invalid_example", /URLs and encoded images/],
      ["two images", imageExample(2, { images: [{ asset_id: asset(2) }, { asset_id: asset(99) }] }), "invalid_example", /exactly one image \(2 given\)/],
      ["two questions", imageExample(2, { questions: { ...DIGIT, other: { type: "noul" } } }), "invalid_example", /exactly one question/],
      ["a noul question", imageExample(2, { questions: { digit: { type: "noul" } } }), "invalid_example", /a choice question, not noul/],
      ["17 answers", imageExample(2, { questions: { digit: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 17 }, (_, k) => [`a${k}`, null])) } } }), "invalid_example", /2 to 16 named answers \(17 given\)/],
      ["a 2,001-character description", imageExample(2, { questions: { digit: { type: "choice", criteria: { zero: "x".repeat(2001), one: null } } } }), "invalid_example", /criteria\.zero: a description at most 2000 characters/],
      ["2,001 characters of instructions", imageExample(2, { questions: { digit: { type: "choice", instructions: "y".repeat(2001), criteria: { zero: null, one: null } } } }), "invalid_example", /instructions: at most 2000/],
      ["structured instructions", imageExample(2, { questions: { digit: { type: "choice", instructions: { say: "y" }, criteria: { zero: null, one: null } } } }), "invalid_example", /instructions: must be text/],
      ["a structured description", imageExample(2, { questions: { digit: { type: "choice", criteria: { zero: ["a"], one: null } } } }), "invalid_example", /criteria\.zero: a description must be text/],
      ["a label that is no answer", imageExample(2, {}, "two"), "invalid_label", /one of its answer names, or null/],
    ])("refuses %s", (_, line, code, message) => {
      const lines = images().map((l, i) => (i === 2 ? line : l));
      const error = refusal(file(lines));
      expect(error).toMatchObject({ code, line: 3 });
      expect(error.message).toMatch(message);
    });

    it("needs as many images of none of the answers as of each answer", () => {
      const lines = images().map((l, i) => (i % 3 === 0 && i > 0 ? imageExample(i, {}, "zero") : l));
      expect(refusal(file(lines))).toMatchObject({ code: "too_few_examples", message: expect.stringContaining("1 example(s) of null (an image of none of the answers)") });
    });
  });
});
