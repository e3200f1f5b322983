/**
 * `svc train ...` (runs in a user's terminal): a model of the account's own, trained from labelled
 * examples of one decision. Training takes the signed-in user's access token (the browser sign-in
 * `svc login` saved, or SVC_ACCESS_TOKEN), never an API key; the trained model then answers
 * `svc decide --model ID` with the API key.
 *
 *     svc train create --file triage.jsonl --wait    check, upload, submit, follow; prints the model id
 *     svc train status ID | list [--status S] | cancel ID   follow, list and stop trainings
 *     svc train report ID [--label-issues]           the evaluation report and the labels that look wrong
 *     svc train retire MODEL                         stop serving a trained model
 *
 * With --wait, a progress bar (examples read through the base model, and the step in words) is
 * drawn when standard error is a terminal; otherwise each change of status is one line there.
 */
import type { Command, Group } from "../command.ts";
import type { Context } from "../context.ts";
import { Failure, UsageError } from "../errors.ts";
import {
  cancelCommand,
  errorText,
  follow,
  formatRows,
  idempotencyKey,
  jsonOption,
  lifecycleRows,
  listCommand,
  metadataOf,
  metadataOption,
  pollSeconds,
  POLL_SECONDS,
  printJob,
  statusCommand,
  submitJob,
  timeLeft,
  type JobKind,
} from "../jobs.ts";
import { labelAuditHeading, renderLabelIssues } from "../render.ts";
import { isTrainingTerminal, LABEL_ISSUE_PAGE, TRAINING_LIMITS, TRAINING_STATUSES, type Client, type EvaluationReport, type Training } from "../sdk.ts";
import { readTrainingFile } from "../training-file.ts";
import { baselineName, TRAINING_LIST_PAGE } from "../../../../contract/trainings.ts";

/** Each question's cross-validated figure beside its baseline's (the base's zero-shot answers, or chance), one line each. */
function figures(training: Training): string[] {
  const baseline = baselineName(training.evaluation?.baseline);
  return (training.evaluation?.questions ?? []).map(
    (q) => `${q.question}  ${q.metric} ${q.candidate.toFixed(3)} (${baseline} ${q.zero_shot.toFixed(3)})  ECE ${q.ece.toFixed(3)}  ${q.passed ? "passed" : "did not pass"}`,
  );
}

/** How the figures were measured: every example held out once. */
const crossValidation = (training: Training) => `each held out once by ${training.limits.acceptance.folds}-fold cross-validation`;

/** What a training adds to the job lifecycle (jobs.ts): the browser sign-in, and its step in words. */
const TRAINING: JobKind<Training> = {
  noun: "training",
  plural: "trainings",
  group: "train",
  page: TRAINING_LIST_PAGE,
  statuses: TRAINING_STATUSES,
  client: (ctx, options) => ctx.trainingClient(options),
  resource: (client) => client.trainings,
  ended: (training) => isTrainingTerminal(training.status),
  line: (training) => `${training.status}${training.progress ? `: ${training.progress.step}` : ""}`,
  bar(training) {
    const progress = training.progress;
    if (!progress) return null;
    const reading = training.status === "running" && progress.examples_total > 0;
    const baseline = baselineName(progress.held_out?.baseline);
    const current = progress.held_out?.questions.map((q) => `${q.question} ${q.metric} ${q.candidate.toFixed(2)} (${baseline} ${q.zero_shot.toFixed(2)})`).join(", ");
    return {
      fraction: reading ? Math.min(1, progress.examples_read / progress.examples_total) : null,
      text: `${progress.step}${current ? ` · cross-validated so far: ${current}` : ""}${timeLeft(progress.estimated_completion_at)}`,
    };
  },
  listed: (training) => `${(training.model ?? `base ${training.base_model}`).padEnd(48)}  ${String(training.examples.total).padStart(5)} examples`,
  followUp: ["status", "cancel"],
};

/** Prints how a finished training ended: the model id and its figures, or why there is none (exit 1). */
async function conclude(ctx: Context, client: Client, training: Training, json: boolean): Promise<void> {
  if (json) ctx.stdout.write(`${JSON.stringify(training)}\n`);
  if (training.status === "ready") {
    if (!json) ctx.stdout.write(`${training.model}\n`);
    ctx.status(`Training ${training.id} ready: model ${training.model}, trained on ${training.examples.total} examples, ${crossValidation(training)}.`);
    ctx.status(`Cross-validated figures, the trained model beside ${training.evaluation?.baseline === "chance" ? "chance" : "the base's zero-shot answers"}:`);
    for (const line of figures(training)) ctx.status(`  ${line}`);
    ctx.status(`Use it with \`svc decide --model ${training.model}\`, asking the questions it was trained on.`);
    return;
  }
  if (training.status === "rejected") {
    for (const line of figures(training)) ctx.status(`  ${line}`);
    const report = await client.trainings.report(training.id, { signal: ctx.signal });
    const reasons = report.questions.flatMap((q) => (q.reason ? [`${q.question}: ${q.reason}`] : []));
    if (report.advice) ctx.status(report.advice);
    throw new Failure(`training ${training.id} rejected (the candidate is never served): ${reasons.join("; ") || "it did not meet the acceptance rule"}`);
  }
  if (training.status === "failed") throw new Failure(`training ${training.id} failed: ${errorText(training.error)}`);
  throw new Failure(`training ${training.id} ${training.status} before it finished`);
}

const create: Command = {
  name: "create",
  summary: "Train a model from a file of labelled examples: check, upload, submit (and with --wait, follow it)",
  usage: "svc train create --file FILE [--model BASE] [--wait] [--exclude-suspected-labels] [--idempotency-key KEY] [--metadata KEY=VALUE ...] [--poll-interval SECONDS] [--json]",
  description: [
    'FILE holds one {"custom_id": "...", "body": <a decision request>, "labels": {"<question id>": <answer>}}',
    `per line (at most ${TRAINING_LIMITS.file_bytes / (1024 * 1024)} MiB and ${TRAINING_LIMITS.examples.toLocaleString("en-US")} examples), every line asking the same questions of the`,
    `same base, with at least ${TRAINING_LIMITS.examples_per_outcome} examples of every outcome. It is checked before anything is sent:`,
    "a file that would fail is refused with exit 2 and its line. Without --wait, prints the training id.",
    "",
    "With --wait, follows the training to its end: ready prints the trained model's id on standard",
    "output and its cross-validated figures on standard error (exit 0); rejected prints why (the",
    "candidate did not beat the base's zero-shot answers with confidence, or was not calibrated), failed",
    "the error, both exit 1. Ctrl-C stops waiting (exit",
    "130) and leaves the training going.",
    "",
    "--metadata team=support (once per pair) labels the training, shown by `svc train status`.",
    "",
    "--exclude-suspected-labels trains a second candidate without the examples whose label looks wrong",
    "(`svc train report` lists them) and keeps whichever the acceptance rule prefers; the report says which.",
    "",
    "Takes the browser sign-in saved by `svc login` (or SVC_ACCESS_TOKEN), not an API key.",
  ].join("\n"),
  options: {
    file: { type: "string", short: "f", value: "FILE", help: "the labelled examples (JSONL)" },
    model: { type: "string", value: "BASE", help: "the base model; the examples' body.model must name it (default: the one they name)" },
    wait: { type: "boolean", help: "follow the training to its end, with a progress bar" },
    "exclude-suspected-labels": { type: "boolean", help: "train again without the examples whose label looks wrong, and keep the better candidate" },
    "idempotency-key": { type: "string", value: "KEY", help: "the same key returns the same training (default: a new training)" },
    ...metadataOption(TRAINING),
    "poll-interval": { type: "string", value: "SECONDS", help: `with --wait, seconds between status checks (default ${POLL_SECONDS})` },
    ...jsonOption(TRAINING),
  },
  async run(ctx, { values }) {
    const path = values.file as string | undefined;
    if (path === undefined) throw new UsageError(`--file FILE is required: the labelled examples\nUsage: ${create.usage}`);
    const seconds = pollSeconds(values);
    const metadata = metadataOf(values);
    const file = await readTrainingFile(path);
    const model = values.model as string | undefined;
    if (model !== undefined && model !== file.base) {
      throw new UsageError(`${path}: the examples name the base ${JSON.stringify(file.base)} (their body.model), not --model ${JSON.stringify(model)}: a training trains the base its examples name`);
    }
    const key = idempotencyKey(values);
    const { client, job: submitted, progress } = await submitJob(ctx, TRAINING, (client) => {
      ctx.status(`Training on ${file.examples} examples from ${path} (base ${file.base}, questions ${file.questions.join(", ")}), idempotency key ${key}.`);
      const exclude = values["exclude-suspected-labels"] === true ? { excludeSuspectedLabels: true } : {};
      return client.trainings.create({ file: file.bytes, model: file.base, idempotencyKey: key, metadata, ...exclude }, { signal: ctx.signal });
    });
    if (!values.wait) {
      printJob(ctx, values.json === true, submitted, submitted.id);
      ctx.status(`Follow it with \`svc train status ${submitted.id}\`.`);
      return;
    }
    const done = await follow(ctx, TRAINING, client, submitted, seconds, progress);
    await conclude(ctx, client, done, values.json === true);
  },
};

function describeTraining(training: Training): string[] {
  const { progress } = training;
  const lines = formatRows([
    ["id", training.id],
    ["status", training.status],
    ["model", training.model],
    ["base", `${training.base_model}${training.base_release && training.base_release !== training.base_model ? ` (release ${training.base_release})` : ""}`],
    ["examples", training.examples.total > 0 ? `${training.examples.total} (${crossValidation(training)})` : null],
    ["progress", progress ? `${progress.step} (${progress.examples_read} of ${progress.examples_total} read)${timeLeft(progress.estimated_completion_at)}` : null],
    ...lifecycleRows(training),
    ["data until", training.data_expires_at],
    ["error", training.error ? errorText(training.error) : null],
    ["report", training.evaluation ? `${training.evaluation.decision}: ${training.evaluation.report}` : null],
  ]);
  for (const line of figures(training)) lines.push(`  ${line}`);
  return lines;
}

/**
 * What the report adds for a person deciding what to do: each question's intervals, precision and
 * recall per outcome, the confusion matrix, and the learning curve over the examples given.
 */
function describeReport(report: EvaluationReport): string[] {
  const f3 = (x: number) => x.toFixed(3);
  const baseline = baselineName(report.baseline);
  const lines: string[] = [];
  for (const q of report.questions) {
    const u = q.uncertainty;
    if (u) {
      const pct = Math.round(u.confidence * 100);
      lines.push(
        `  ${q.question}  ${q.candidate.primary_metric} ${f3(q.candidate.primary)} [${f3(u.candidate_primary.low)}, ${f3(u.candidate_primary.high)}], ` +
          `${baseline} ${f3(q.zero_shot.primary)} [${f3(u.zero_shot_primary.low)}, ${f3(u.zero_shot_primary.high)}], difference ${f3(u.difference.estimate)} ` +
          `[${f3(u.difference.low)}, ${f3(u.difference.high)}] (${pct} %); ECE ${f3(q.candidate.ece)} (noise on ${q.candidate.items} examples up to ${f3(u.ece_noise)})`,
      );
    }
    if (q.confusion && q.per_outcome) {
      const names = q.outcomes.map((o) => (o === null ? "other" : String(o)));
      lines.push(`  ${q.question}  per answer: ${names.map((name, k) => `${name} precision ${q.per_outcome![k]!.precision?.toFixed(2) ?? "-"} recall ${q.per_outcome![k]!.recall?.toFixed(2) ?? "-"}`).join("; ")}`);
      lines.push(`  ${q.question}  confusion (rows: truth, columns: answer ${names.join(" | ")}): ${q.confusion.map((row, t) => `${names[t]} [${row.join(" ")}]`).join(", ")}`);
    }
  }
  if (report.learning_curve && report.learning_curve.length > 0) {
    const questions = report.learning_curve.at(-1)!.questions.map((q) => q.question);
    for (const question of questions) {
      const points = report.learning_curve.map((p) => {
        const at = p.questions.find((q) => q.question === question)!;
        return `${p.examples} examples ${f3(at.candidate)} (${baseline} ${f3(at.zero_shot)})`;
      });
      lines.push(`  ${question}  learning curve: ${points.join(" · ")}`);
    }
  }
  lines.push(...formatRows([["advice", report.advice]]));
  return lines;
}

/** The report's own rows and each question's figure beside its baseline's, then what describeReport adds. */
function reportLines(report: EvaluationReport): string[] {
  const f3 = (x: number) => x.toFixed(3);
  const baseline = baselineName(report.baseline);
  const lines = formatRows([
    ["training", report.training],
    ["decision", report.decision],
    ["model", report.model],
    ["base", report.base_release],
    ["examples", `${report.examples.training} (${report.examples.held_out} held out)`],
    ["evaluated", report.evaluated_at],
  ]);
  for (const q of report.questions) {
    const outcome = q.passed ? "passed" : `did not pass${q.reason ? `: ${q.reason}` : ""}`;
    lines.push(`  ${q.question}  ${q.candidate.primary_metric} ${f3(q.candidate.primary)} (${baseline} ${f3(q.zero_shot.primary)})  ECE ${f3(q.candidate.ece)}  ${outcome}`);
  }
  return [...lines, ...describeReport(report)];
}

const report: Command = {
  name: "report",
  summary: "Show a training's evaluation report and the labels that look wrong",
  usage: "svc train report ID [--label-issues] [--json]",
  description: [
    "The candidate's cross-validated figures per question beside its baseline's (the base's zero-shot",
    "answers, or chance), their intervals, precision and recall per answer, the confusion matrix and the",
    "learning curve; then the label audit: how many examples' labels look wrong (confident learning over",
    `the out-of-fold answers) and the first ${LABEL_ISSUE_PAGE.default} of them, lowest label quality first, each with the label`,
    "given, the answer the model prefers and both probabilities.",
    "",
    "--label-issues lists every label that looks wrong instead of the report (with --json, each one's",
    "JSON object, one a line). A training not evaluated yet exits 1 (409 report_not_ready).",
    "",
    "Takes the browser sign-in saved by `svc login` (or SVC_ACCESS_TOKEN), not an API key.",
  ].join("\n"),
  options: {
    "label-issues": { type: "boolean", help: "list every label that looks wrong (all pages) instead of the report" },
    json: { type: "boolean", help: "print the report JSON; with --label-issues, each label issue's JSON, one a line" },
  },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const id = positionals[0]!;
    const client = ctx.trainingClient();
    const allIssues = () => client.trainings.labelIssues(id, { limit: LABEL_ISSUE_PAGE.max }, { signal: ctx.signal });
    if (values["label-issues"] && values.json) {
      for await (const issue of allIssues()) ctx.stdout.write(`${JSON.stringify(issue)}\n`);
      return;
    }
    const evaluation = await client.trainings.report(id, { signal: ctx.signal });
    if (values.json) {
      ctx.stdout.write(`${JSON.stringify(evaluation)}\n`);
      return;
    }
    const audit = evaluation.label_audit;
    if (values["label-issues"]) {
      if (!audit) {
        ctx.status(`The report of training ${id} has no label audit: it was made before there was one.`);
        return;
      }
      const issues = await allIssues().toArray();
      ctx.stdout.write(`${labelAuditHeading(audit)}\n${issues.length > 0 ? renderLabelIssues(issues) : ""}`);
      return;
    }
    const lines = reportLines(evaluation);
    if (audit) {
      lines.push("", labelAuditHeading(audit));
      if (audit.issues.length > 0) lines.push(renderLabelIssues(audit.issues.map((issue, i) => ({ ...issue, rank: i + 1 }))).trimEnd());
    }
    ctx.stdout.write(`${lines.join("\n")}\n`);
    if (audit?.has_more) ctx.status(`More: svc train report ${id} --label-issues (all ${audit.suspected})`);
  },
};

const status = statusCommand(TRAINING, "Show a training's status, progress, model and cross-validated figures", async (training, ctx, client) => {
  const report = training.evaluation ? await client.trainings.report(training.id, { signal: ctx.signal }) : null;
  return [...describeTraining(training), ...(report ? describeReport(report) : [])];
});
const list = listCommand(TRAINING);
const cancel = cancelCommand(TRAINING, "Cancel a training that has not finished");

const retire: Command = {
  name: "retire",
  summary: "Retire a model the account trained: new requests for it answer 404",
  usage: "svc train retire MODEL [--json]",
  description: "MODEL is a trained model's id (`svc train status ID` shows it). Only the account's own trained models can be retired.",
  options: { json: { type: "boolean", help: "print the response JSON" } },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const retired = await ctx.trainingClient().models.retire(positionals[0]!, { signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify(retired)}\n` : `${retired.id} retired\n`);
  },
};

export const train: Group = {
  name: "train",
  summary: "Train a model of your own from labelled examples (with the `svc login` browser sign-in)",
  description: [
    "Training takes the browser sign-in saved by `svc login` (or SVC_ACCESS_TOKEN with SVC_BASE_URL),",
    "not an API key. A trained model answers `svc decide --model ID` with the account's API key.",
  ].join("\n"),
  commands: [create, status, report, list, cancel, retire],
};
