/**
 * The cost of reading request JSON with contract/json.ts (key order kept, duplicates, U+0000 and
 * lone surrogates refused) against the engine's `JSON.parse`, on bodies the service sees: a typical
 * decision, a 255-option choice, and a 665 KB state. The two parsers run interleaved,
 * round by round, so that both see the same machine state; the figure is the median per parse.
 *
 *     npm run bench:json
 */
import { parseJson } from "../contract/json.ts";

const typical = JSON.stringify({
  model: "svc-shared",
  state: { ticket: "I was charged twice for my March invoice.", customer: { plan: "pro", seats: 12 } },
  questions: {
    refund: { type: "noul", instructions: "Does the customer ask for a refund?" },
    topic: { type: "choice", criteria: { billing: "payments", bug: "a defect", other: null } },
    severity: { type: "score", criteria: ["none", "low", "high"] },
  },
});
const options = JSON.stringify({
  state: "pick one",
  questions: { q: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 255 }, (_, i) => [`option-${i}`, `description of option ${i}`])) } },
});
const large = JSON.stringify({
  state: { notes: Array.from({ length: 9000 }, (_, i) => `note ${i}: the customer wrote a long message about invoices and refunds`) },
  questions: { q: { type: "noul" } },
});

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function time(run: () => unknown, repeat: number): number {
  const started = performance.now();
  for (let i = 0; i < repeat; i++) run();
  return (performance.now() - started) / repeat;
}

console.log("body                     bytes     JSON.parse    parseJson    ratio");
for (const [name, text, repeat] of [
  ["typical decision", typical, 2000],
  ["255-option choice", options, 200],
  ["665 KB state", large, 5],
] as const) {
  const plain: number[] = [];
  const ordered: number[] = [];
  for (let round = 0; round < 15; round++) {
    plain.push(time(() => JSON.parse(text), repeat));
    ordered.push(time(() => parseJson(text, { maxDepth: 32 }), repeat));
  }
  const [a, b] = [median(plain), median(ordered)];
  const bytes = new TextEncoder().encode(text).length;
  console.log(`${name.padEnd(22)} ${String(bytes).padStart(8)} ${`${(a * 1000).toFixed(1)} µs`.padStart(13)} ${`${(b * 1000).toFixed(1)} µs`.padStart(12)} ${(b / a).toFixed(2).padStart(8)}`);
}
