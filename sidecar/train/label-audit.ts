/**
 * The label audit of a training (runs in the sidecar's training worker): which given labels look
 * wrong, read from the out-of-fold answers the acceptance already computes (every example answered by
 * heads fitted without it), so it costs no pass.
 *
 * Confident learning (Northcutt, Jiang and Chuang, "Confident Learning: Estimating Uncertainty in
 * Dataset Labels", JAIR 2021): each outcome's threshold is the mean probability the answers give it
 * over the examples labelled with it. An example labelled g is suspected when some other outcome k
 * gets at least k's threshold (it would count off the confident joint's diagonal); the outcome the
 * model prefers is the most probable such k. Every example's label quality is the probability its
 * answer gives the given label (self-confidence); suspects are ranked by it, lowest first, the
 * ranking cleanlab's `find_label_issues` uses by default.
 *
 *     const suspects = auditLabels(answers, given, 2);   // [{index, given, preferred, givenProbability, preferredProbability}, ...]
 *     report.label_audit = labelAuditOf(examples, [{ question: "spam", suspects }], (q) => outcomesOf(q));
 */
import { LABEL_ISSUE_PAGE, type LabelAudit, type LabelIssue } from "../../contract/trainings.ts";

/** An example whose given label looks wrong. */
export interface LabelSuspect {
  /** Its index in the answers. */
  index: number;
  /** The given label and the outcome the model prefers, as outcome indices. */
  given: number;
  preferred: number;
  /** The out-of-fold probability of each: the given one is the example's label quality. */
  givenProbability: number;
  preferredProbability: number;
}

/**
 * The suspects among examples answered `answers` (each a probability per outcome, `classes` of them)
 * whose given labels are `given`, lowest label quality first (ties: the more probable preferred
 * outcome first, then input order). An outcome nobody was labelled with has no threshold and is never
 * preferred.
 */
export function auditLabels(answers: readonly (readonly number[])[], given: readonly number[], classes: number): LabelSuspect[] {
  if (answers.length !== given.length) throw new Error(`auditLabels: ${answers.length} answers for ${given.length} labels`);
  const sums = new Array<number>(classes).fill(0);
  const counts = new Array<number>(classes).fill(0);
  given.forEach((g, i) => {
    sums[g]! += answers[i]![g]!;
    counts[g]! += 1;
  });
  const thresholds = sums.map((sum, k) => (counts[k]! > 0 ? sum / counts[k]! : Number.POSITIVE_INFINITY));
  const suspects: LabelSuspect[] = [];
  answers.forEach((p, index) => {
    const g = given[index]!;
    let preferred = -1;
    for (let k = 0; k < classes; k++) {
      if (k !== g && p[k]! >= thresholds[k]! && (preferred === -1 || p[k]! > p[preferred]!)) preferred = k;
    }
    if (preferred !== -1) suspects.push({ index, given: g, preferred, givenProbability: p[g]!, preferredProbability: p[preferred]! });
  });
  return suspects.sort((a, b) => a.givenProbability - b.givenProbability || b.preferredProbability - a.preferredProbability || a.index - b.index);
}

/**
 * The report's label audit (contract/trainings.ts LabelAudit) from each question's suspects: every
 * issue named by its example's custom_id and line and by the outcomes' names (`outcomes`, a question's
 * as its evaluation names them), all questions' issues in one ranking, lowest label quality first.
 * The list (at most LABEL_ISSUE_PAGE.listed) is kept with the report; the edge pages it.
 */
export function labelAuditOf(
  examples: readonly { customId: string; line: number }[],
  audits: readonly { question: string; suspects: readonly LabelSuspect[] }[],
  outcomes: (question: string) => readonly LabelIssue["given"][],
): LabelAudit {
  const issues = audits.flatMap(({ question, suspects }) => {
    const names = outcomes(question);
    return suspects.map((s) => ({
      custom_id: examples[s.index]!.customId,
      line: examples[s.index]!.line,
      question,
      given: names[s.given]!,
      preferred: names[s.preferred]!,
      given_probability: s.givenProbability,
      preferred_probability: s.preferredProbability,
    }));
  });
  issues.sort((a, b) => a.given_probability - b.given_probability || b.preferred_probability - a.preferred_probability || a.line - b.line || (a.question < b.question ? -1 : 1));
  return { method: "confident_learning", examples: examples.length, suspected: issues.length, issues: issues.slice(0, LABEL_ISSUE_PAGE.listed), has_more: false };
}

/** A candidate's judgements as the acceptance rule made them (candidate.ts evaluations). */
type Judged = readonly { passed: boolean; uncertainty?: { difference: { low: number } } | undefined }[];

/**
 * Which of two candidates the acceptance rule prefers: the one trained on every example, or the one
 * trained without the examples the audit suspects. More questions passed wins; on a tie, the higher
 * sum over questions of the rule's own statistic, the lower bound of the candidate's lead over its
 * baseline (each candidate's over the same examples it was cross-validated on); on a tie again,
 * every example. Each is cross-validated on its own examples, so the one without the suspects is
 * judged without them: where their labels were wrong that is the fairer test, and where they were
 * right it flatters it, which is why a lead must show in the rule's statistic, not only in a figure.
 */
export function preferredCandidate(all: Judged, without: Judged): { kept: "all_examples" | "without_suspected"; reason: string } {
  const passed = (j: Judged) => j.filter((q) => q.passed).length;
  const lead = (j: Judged) => j.reduce((sum, q) => sum + (q.uncertainty?.difference.low ?? Number.NEGATIVE_INFINITY), 0);
  const [a, b] = [passed(all), passed(without)];
  if (a !== b) {
    return b > a
      ? { kept: "without_suspected", reason: `without them ${b} of ${without.length} questions met the acceptance rule, against ${a} with every example` }
      : { kept: "all_examples", reason: `with every example ${a} of ${all.length} questions met the acceptance rule, against ${b} without them` };
  }
  const [la, lb] = [lead(all), lead(without)];
  return lb > la
    ? { kept: "without_suspected", reason: `as many questions met the rule either way, and its lead over the baseline was surer without them (${lb.toFixed(3)} against ${la.toFixed(3)}, the sum of each question's lower bound)` }
    : { kept: "all_examples", reason: `as many questions met the rule either way, and its lead over the baseline was no surer without them (${lb.toFixed(3)} against ${la.toFixed(3)}, the sum of each question's lower bound)` };
}
