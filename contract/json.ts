/**
 * JSON that keeps every object key, in document order, as data. `JSON.parse` builds plain objects,
 * where an integer-like key ("2", "10") moves ahead of the others and a duplicate key silently
 * replaces the first; the contract gives key order a meaning (question order, option order, the tie
 * order), so requests are read here instead, with objects as `Map`s, and written back in order.
 *
 *     const body = parseJson('{"questions":{"2":{"type":"noul"},"1":{"type":"noul"}}}', { maxDepth: 32 });
 *     [...(body as JsonMap).get("questions").keys()];   // ["2", "1"]
 *     stringifyJson(body);                               // the same text back, in the same order
 *
 * What is refused, with the path of the offending value: malformed JSON, nesting deeper than
 * `maxDepth`, a key repeated in one object, U+0000 in any string or key (it cannot reach a database
 * or a model), a UTF-16 surrogate without its pair (not a Unicode string), and numbers too large to
 * represent. Depth counts containers: a scalar is 0, `{}` and `[]` are 1.
 */
import type { ZodError } from "zod";

export type Json = null | boolean | number | string | Json[] | JsonMap | { [key: string]: Json };
export type JsonMap = Map<string, Json>;

/** Why a JSON text was refused. `path` locates the value ("questions.q1.criteria"), "" for the top. */
export class JsonError extends Error {
  override readonly name = "JsonError";
  constructor(
    readonly reason: "syntax" | "depth" | "duplicate_key" | "nul" | "surrogate" | "number",
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}

/** Longest piece of a client-supplied name that any message echoes. */
export const ECHO_MAX = 40;

/** A client-supplied name as a message quotes it: at most ECHO_MAX characters, JSON-escaped. */
export function quoteName(name: string): string {
  const short = name.length > ECHO_MAX ? `${name.slice(0, ECHO_MAX)}…` : name;
  return JSON.stringify(short);
}

/** A path of keys and indexes as messages write it: `questions.q1.criteria`, long keys and paths shortened. */
export function formatPath(path: readonly PropertyKey[]): string {
  const text = path
    .map((segment) => {
      const key = String(segment);
      if (typeof segment === "number" || /^[A-Za-z0-9_-]{1,40}$/.test(key)) return key;
      return quoteName(key);
    })
    .join(".");
  return text.length > 5 * ECHO_MAX ? `${text.slice(0, 5 * ECHO_MAX)}…` : text;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// eslint-disable-next-line no-control-regex -- a JSON string may not hold raw control characters
const PLAIN_RUN = /[^"\\\u0000-\u001f]*/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const WHITESPACE = /[ \t\n\r]*/y;
const ESCAPES: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

export function parseJson(text: string, options: { maxDepth?: number } = {}): Json {
  // Recursion follows nesting, so a bound always applies; 256 is far below any engine's stack.
  const parser = new Parser(text, Math.min(options.maxDepth ?? 256, 256));
  const value = parser.value(0);
  parser.skipWhitespace();
  if (parser.at < text.length) parser.fail("syntax", `unexpected text after the JSON value at character ${parser.at}`);
  return value;
}

class Parser {
  at = 0;
  private readonly path: (string | number)[] = [];

  constructor(
    private readonly text: string,
    private readonly maxDepth: number,
  ) {}

  fail(reason: JsonError["reason"], message: string): never {
    throw new JsonError(reason, message, formatPath(this.path));
  }

  skipWhitespace(): void {
    WHITESPACE.lastIndex = this.at;
    WHITESPACE.test(this.text);
    this.at = WHITESPACE.lastIndex;
  }

  value(depth: number): Json {
    this.skipWhitespace();
    const c = this.text[this.at];
    if (c === "{" || c === "[") {
      if (depth + 1 > this.maxDepth) this.fail("depth", `nested deeper than ${this.maxDepth} levels`);
      return c === "{" ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === '"') return this.string();
    if (this.text.startsWith("true", this.at)) return this.literal("true", true);
    if (this.text.startsWith("false", this.at)) return this.literal("false", false);
    if (this.text.startsWith("null", this.at)) return this.literal("null", null);
    return this.number();
  }

  private literal<T>(word: string, value: T): T {
    this.at += word.length;
    return value;
  }

  private number(): number {
    NUMBER.lastIndex = this.at;
    const match = NUMBER.exec(this.text);
    if (!match || match[0] === "" || match[0] === "-") {
      this.fail("syntax", this.at >= this.text.length ? "the JSON text ends early" : `unexpected character at ${this.at}`);
    }
    this.at = NUMBER.lastIndex;
    const value = Number(match[0]);
    if (!Number.isFinite(value)) this.fail("number", "a number is too large to represent");
    return value;
  }

  private string(): string {
    this.at++; // the opening quote
    let out = "";
    for (;;) {
      PLAIN_RUN.lastIndex = this.at;
      PLAIN_RUN.test(this.text);
      out += this.text.slice(this.at, PLAIN_RUN.lastIndex);
      this.at = PLAIN_RUN.lastIndex;
      const c = this.text[this.at];
      if (c === '"') {
        this.at++;
        break;
      }
      if (c !== "\\") this.fail("syntax", c === undefined ? "a string is not closed" : `a control character in a string at ${this.at}`);
      const e = this.text[this.at + 1];
      if (e === "u") {
        const hex = this.text.slice(this.at + 2, this.at + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("syntax", `a bad \\u escape at ${this.at}`);
        const code = parseInt(hex, 16);
        if (code === 0) this.fail("nul", "U+0000 is not allowed in text");
        out += String.fromCharCode(code);
        this.at += 6;
      } else if (e !== undefined && e in ESCAPES) {
        out += ESCAPES[e];
        this.at += 2;
      } else {
        this.fail("syntax", `a bad escape at ${this.at}`);
      }
    }
    if (LONE_SURROGATE.test(out)) this.fail("surrogate", "a string holds a UTF-16 surrogate without its pair");
    return out;
  }

  private array(depth: number): Json[] {
    this.at++;
    const items: Json[] = [];
    this.skipWhitespace();
    if (this.text[this.at] === "]") {
      this.at++;
      return items;
    }
    for (;;) {
      this.path.push(items.length);
      items.push(this.value(depth));
      this.path.pop();
      this.skipWhitespace();
      const c = this.text[this.at++];
      if (c === "]") return items;
      if (c !== ",") this.fail("syntax", c === undefined ? "the JSON text ends early" : `expected , or ] at ${this.at - 1}`);
    }
  }

  private object(depth: number): JsonMap {
    this.at++;
    const map: JsonMap = new Map();
    this.skipWhitespace();
    if (this.text[this.at] === "}") {
      this.at++;
      return map;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.at] !== '"') this.fail("syntax", this.at >= this.text.length ? "the JSON text ends early" : `expected a key at ${this.at}`);
      const key = this.string();
      if (map.has(key)) this.fail("duplicate_key", `the key ${quoteName(key)} appears twice in one object`);
      this.skipWhitespace();
      if (this.text[this.at++] !== ":") this.fail("syntax", `expected : at ${this.at - 1}`);
      this.path.push(key);
      map.set(key, this.value(depth));
      this.path.pop();
      this.skipWhitespace();
      const c = this.text[this.at++];
      if (c === "}") return map;
      if (c !== ",") this.fail("syntax", c === undefined ? "the JSON text ends early" : `expected , or } at ${this.at - 1}`);
    }
  }
}

/**
 * Compact JSON text of a value, with `Map`s written as objects in their order. Plain objects are
 * written with their own enumerable keys (an own `__proto__` included); `undefined` members are left
 * out, as `JSON.stringify` does.
 */
export function stringifyJson(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "string" || typeof value === "boolean") return JSON.stringify(value);
  if (typeof value === "number") return Number.isFinite(value) ? JSON.stringify(value) : "null";
  if (Array.isArray(value)) return `[${value.map((item) => stringifyJson(item)).join(",")}]`;
  const entries = value instanceof Map ? [...value.entries()] : Object.entries(value as object);
  const members: string[] = [];
  for (const [key, member] of entries) {
    if (member !== undefined) members.push(`${JSON.stringify(String(key))}:${stringifyJson(member)}`);
  }
  return `{${members.join(",")}}`;
}

/** A JSON object as an ordered map: a Map stays as it is; a plain object gives its own keys in JS order. */
export function toJsonMap(value: unknown): unknown {
  if (value instanceof Map || value === null || typeof value !== "object" || Array.isArray(value)) return value;
  return new Map(Object.entries(value));
}

/**
 * A JSON object as a record for a fixed-shape schema: a Map becomes a null-prototype object, so a
 * `__proto__` key stays an ordinary (and, for a strict shape, refused) key.
 */
export function toRecord(value: unknown): unknown {
  if (!(value instanceof Map)) return value;
  const record = Object.create(null) as Record<string, unknown>;
  for (const [key, member] of value) record[key] = member;
  return record;
}

/**
 * "questions.q1.criteria: a choice needs at least 2 options; name: name is required". At most five
 * issues; paths shorten long keys, unknown fields are named by a short prefix, and each message is cut
 * short, so no error body grows with the input.
 */
export function describeIssues(error: ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => {
      const message =
        issue.code === "unrecognized_keys"
          ? `unknown field ${formatPath([issue.keys[0] ?? ""])}${issue.keys.length > 1 ? ` and ${issue.keys.length - 1} more` : ""}`
          : issue.message.length > 4 * ECHO_MAX
            ? `${issue.message.slice(0, 4 * ECHO_MAX)}…`
            : issue.message;
      return issue.path.length > 0 ? `${formatPath(issue.path)}: ${message}` : message;
    })
    .join("; ");
}
