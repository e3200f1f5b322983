/**
 * Readable output of `svc decide`, `svc models`, `svc keys list`, `svc webhooks` and the label audit
 * of `svc train report` (runs in a user's terminal): each answer with its probabilities and a small
 * bar per option, in the order the request gave its questions and options; keys, webhook endpoints,
 * deliveries and label issues as tables.
 *
 *     money  noul  false (p(true) = 0.283)
 *       true   0.283  ██████░░░░░░░░░░░░░░
 *       false  0.717  ██████████████░░░░░░
 *     level  score  1.08 of 0-2 (confidence 0.230)
 *       0 low     0.261  █████░░░░░░░░░░░░░░░
 *       1 medium  0.402  ████████░░░░░░░░░░░░
 *       2 high    0.337  ███████░░░░░░░░░░░░░
 */
import { stringifyJson } from "../../../contract/json.ts";
import type { Answer, DecisionResponse, KeyMetadata, LabelAudit, ModelItem, RankedLabelIssue, WebhookDelivery, WebhookEndpoint } from "./sdk.ts";

const BAR_WIDTH = 20;
/** Labels longer than this are cut, so a bar stays on its line. */
const LABEL_MAX = 40;

export function bar(probability: number, width = BAR_WIDTH): string {
  const filled = Math.round(Math.min(1, Math.max(0, probability)) * width);
  return "█".repeat(filled) + "░".repeat(width - filled);
}

const fixed = (n: number) => n.toFixed(3);

function label(value: unknown): string {
  const text = typeof value === "string" ? value : stringifyJson(value);
  return text.length > LABEL_MAX ? `${text.slice(0, LABEL_MAX - 1)}…` : text;
}

/** Rows of `label  probability  bar`, labels padded to one width. */
function rows(entries: Array<[string, number]>): string[] {
  const width = Math.max(...entries.map(([name]) => name.length));
  return entries.map(([name, p]) => `  ${name.padEnd(width)}  ${fixed(p)}  ${bar(p)}`);
}

/**
 * The keys of `probabilities` in the request's order (`order`), then any the request did not name.
 * Answers arrive as JSON objects, which put integer-like keys first; the request knows the real order.
 */
function ordered(probabilities: Record<string, number>, order: readonly string[] | undefined): Array<[string, number]> {
  const keys = [...(order ?? []).filter((key) => key in probabilities), ...Object.keys(probabilities).filter((key) => !order?.includes(key))];
  return keys.map((key) => [key, probabilities[key]!]);
}

export function renderAnswer(id: string, answer: Answer, optionOrder?: readonly string[]): string[] {
  switch (answer.type) {
    case "noul": {
      const verdict = answer.noul >= 0.5 ? "true" : "false";
      return [`${id}  noul  ${verdict} (p(true) = ${fixed(answer.noul)})`, ...rows([["true", answer.noul], ["false", 1 - answer.noul]])];
    }
    case "choice":
      return [`${id}  choice  ${label(answer.choice)} (confidence ${fixed(answer.confidence)})`, ...rows(ordered(answer.probabilities, optionOrder).map(([name, p]) => [label(name), p]))];
    case "score": {
      const levels = Object.keys(answer.probabilities).sort((a, b) => Number(a) - Number(b));
      const top = levels.length - 1;
      const entries = levels.map((level): [string, number] => [`${level} ${label(answer.legend[level] ?? "")}`, answer.probabilities[level]!]);
      return [`${id}  score  ${answer.score.toFixed(2)} of 0-${top} (confidence ${fixed(answer.confidence)})`, ...rows(entries)];
    }
    default:
      return [`${id}  ${stringifyJson(answer)}`];
  }
}

/** Every answer, in the request's question order; `options` gives each choice question's option order. */
export function renderDecision(response: DecisionResponse, questionOrder: readonly string[], options: Map<string, readonly string[]>): string {
  const answers = response.answers as Record<string, Answer>;
  const ids = [...questionOrder.filter((id) => id in answers), ...Object.keys(answers).filter((id) => !questionOrder.includes(id))];
  return `${ids.flatMap((id) => renderAnswer(id, answers[id]!, options.get(id))).join("\n")}\n`;
}

/** One line of usage for stderr: the release that answered and the tokens it used. */
export function usageLine(response: DecisionResponse, requestId: string | null): string {
  const { input_tokens, output_tokens, billable_input_tokens } = response.usage;
  const billable = billable_input_tokens === undefined ? "" : `, ${billable_input_tokens} billable`;
  return `model ${response.model} · ${input_tokens} input tokens${billable}, ${output_tokens} output${requestId ? ` · request ${requestId}` : ""}`;
}

export function renderModels(models: readonly ModelItem[]): string {
  if (models.length === 0) return "No models are available to this key.\n";
  const table = [["NAME", "ALIASES", "RELEASED", "DESCRIPTION"], ...models.map((m) => [m.name, m.aliases.join(", ") || "-", m.release_date, m.description])];
  const widths = [0, 1, 2].map((col) => Math.max(...table.map((row) => row[col]!.length)));
  return `${table.map((row) => row.map((cell, col) => (col < 3 ? cell.padEnd(widths[col]!) : cell)).join("  ").trimEnd()).join("\n")}\n`;
}

/** A name as one printable cell: control characters escaped, cut at LABEL_MAX. */
function cell(text: string): string {
  // eslint-disable-next-line no-control-regex
  const printable = text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  return printable.length > LABEL_MAX ? `${printable.slice(0, LABEL_MAX - 1)}…` : printable;
}

/** `svc keys list`: a row per key, newest first; `all`, `any` and `never` where the key has no limit. */
export function renderKeys(keys: readonly KeyMetadata[]): string {
  if (keys.length === 0) return "No keys.\n";
  return table([
    ["NAME", "ID", "STATUS", "SCOPE", "MODELS", "EXPIRES"],
    ...keys.map((k) => [cell(k.name), k.id, k.status, k.scope ?? "all", k.models === null ? "any" : cell(k.models.join(",")), k.expires_at ?? "never"]),
  ]);
}

/** `svc webhooks list`: a row per endpoint, newest first; the URL last, whole. */
export function renderWebhooks(endpoints: readonly WebhookEndpoint[]): string {
  if (endpoints.length === 0) return "No webhook endpoints.\n";
  return table([["ID", "EVENTS", "DESCRIPTION", "URL"], ...endpoints.map((e) => [e.id, e.events.join(","), e.description === null ? "-" : cell(e.description), e.url])]);
}

/** `svc webhooks deliveries`: a row per delivery, newest first; LAST is the receiver's status, or why no answer came. */
export function renderDeliveries(deliveries: readonly WebhookDelivery[]): string {
  if (deliveries.length === 0) return "No deliveries.\n";
  return table([
    ["ID", "EVENT", "JOB", "STATUS", "ATTEMPTS", "LAST", "CREATED"],
    ...deliveries.map((d) => [d.id, d.event_type, d.job_id, d.status, String(d.attempts), String(d.last_status_code ?? d.last_error ?? "-"), d.created_at]),
  ]);
}

/** `svc train report`: the label audit's heading line. */
export function labelAuditHeading(audit: LabelAudit): string {
  const heading = `Labels that look wrong: ${audit.suspected} of ${audit.examples} examples (confident learning)`;
  const retrained = audit.retrained;
  if (!retrained) return heading;
  const kept = retrained.kept === "without_suspected" ? `the model was trained without those ${retrained.excluded} examples` : "the model was trained on every example";
  return `${heading}\nTrained again without them as asked: ${kept} (${retrained.reason})`;
}

/** An outcome as a report names it: an image model's "other" is null. */
const outcomeCell = (outcome: RankedLabelIssue["given"]) => (outcome === null ? "other" : cell(String(outcome)));

/** `svc train report`: a row per label issue, lowest label quality first, both probabilities to 2 decimals. */
export function renderLabelIssues(issues: readonly RankedLabelIssue[]): string {
  return table([
    ["RANK", "CUSTOM_ID", "LINE", "QUESTION", "GIVEN", "PREFERRED", "P(GIVEN)", "P(PREFERRED)"],
    ...issues.map((i) => [
      String(i.rank),
      cell(i.custom_id),
      String(i.line),
      cell(i.question),
      outcomeCell(i.given),
      outcomeCell(i.preferred),
      i.given_probability.toFixed(2),
      i.preferred_probability.toFixed(2),
    ]),
  ]);
}

/** Rows as columns two spaces apart, each as wide as its widest cell. */
function table(rows: readonly string[][]): string {
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((row) => row[col]!.length)));
  return `${rows.map((row) => row.map((text, col) => text.padEnd(widths[col]!)).join("  ").trimEnd()).join("\n")}\n`;
}
