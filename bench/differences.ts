/**
 * How far two executions of one decision differ, for the benchmarks that run a decision two ways
 * (bench/shared-work.ts, bench/group-numbers.ts).
 */
import type { Answer } from "../contract/decision.ts";
import type { Execution } from "../sidecar/decide/execute.ts";

/** The largest difference between two executions' probabilities, over every answer and option. */
export function largestDifference(a: Execution, b: Execution): number {
  const values = (answer: Answer) => (answer.type === "noul" ? [answer.noul] : [...answer.probabilities.values()]);
  let largest = 0;
  for (const [id, answer] of a.answers) {
    const other = values(b.answers.get(id)!);
    values(answer).forEach((p, i) => (largest = Math.max(largest, Math.abs(p - other[i]!))));
  }
  return largest;
}
