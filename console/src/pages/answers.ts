/** One answer in a few words, for tables (runs in the browser). */
import type { Answer } from "../../../contract/decision.ts";

export function answerSummary(answer: Answer): string {
  if (answer.type === "noul") return `yes ${answer.noul.toFixed(3)}`;
  if (answer.type === "choice") return `${answer.choice} (${(answer.probabilities.get(answer.choice) ?? 0).toFixed(3)})`;
  return `score ${answer.score.toFixed(2)} (confidence ${answer.confidence.toFixed(3)})`;
}
