/**
 * `svc batches ...` (runs in a user's terminal): bulk jobs from a JSONL file.
 *
 *     svc batches run tickets.jsonl --output results.jsonl   create, upload, submit, wait, write results
 *     svc batches create tickets.jsonl --metadata team=support   create, upload and submit; prints the id
 *     svc batches status ID | cancel ID | list [--status S] | results ID
 *
 * Progress bars (upload, then records done and the estimated time left) are drawn only when
 * standard error is a terminal; otherwise each step is one line on standard error. Results are JSONL
 * on standard output or in --output FILE, one `{custom_id, response}` or `{custom_id, error}` a line.
 */
import { createWriteStream, type WriteStream } from "node:fs";
import { once } from "node:events";
import { readBatchFile } from "../batch-file.ts";
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
import type { Progress } from "../progress.ts";
import { BATCH_LIST_PAGE } from "../../../../contract/batches.ts";
import { BATCH_STATUSES, isTerminal, type Batch, type Client, type Metadata, type ResultStream } from "../sdk.ts";

function counts(batch: Batch): string {
  const { total, completed, failed } = batch.request_counts;
  return `${completed + failed} of ${total} records done${failed > 0 ? ` (${failed} failed)` : ""}`;
}

/** What a batch adds to the job lifecycle (jobs.ts): the API key, and its records done. */
const BATCH: JobKind<Batch> = {
  noun: "batch",
  plural: "batches",
  group: "batches",
  page: BATCH_LIST_PAGE,
  statuses: BATCH_STATUSES,
  client: (ctx, options) => ctx.client(options),
  resource: (client) => client.batches,
  ended: (batch) => isTerminal(batch.status),
  line: (batch) => `${batch.status}: ${counts(batch)}`,
  bar(batch) {
    const { total, completed, failed } = batch.request_counts;
    if (batch.status !== "running" || total === 0) return null;
    return { fraction: (completed + failed) / total, text: `${counts(batch)}${timeLeft(batch.progress?.estimated_completion_at)}` };
  },
  listed: (batch) => counts(batch).padEnd(32),
  followUp: ["status", "results", "cancel"],
};

/** Checks the file, then creates the batch (with `metadata`, when given), uploads the file with a progress bar, and submits it. */
async function createAndSubmit(ctx: Context, file: string, key: string, metadata: Metadata | undefined): Promise<{ client: Client; batch: Batch; progress: Progress }> {
  const { bytes, records } = await readBatchFile(file);
  const { client, job, progress } = await submitJob(ctx, BATCH, async (client) => {
    const created = await client.batches.create({ inputBytes: bytes.byteLength, idempotencyKey: key, metadata }, { signal: ctx.signal });
    ctx.status(`Batch ${created.id} (idempotency key ${key}): ${records} record${records === 1 ? "" : "s"} from ${file}.`);
    if (created.upload) await client.batches.upload(created, bytes, { signal: ctx.signal });
    return client.batches.submit(created.id, { signal: ctx.signal });
  });
  return { client, batch: job, progress };
}

/**
 * Writes results as JSONL to `output` (a file) or standard output; returns how many. The first page
 * is read before the file is opened, so a batch that has no results yet leaves no empty file.
 */
async function writeResults(ctx: Context, results: ResultStream, output: string | undefined): Promise<number> {
  const records = results[Symbol.asyncIterator]();
  let next = await records.next();
  let stream: NodeJS.WritableStream = ctx.stdout;
  let file: WriteStream | undefined;
  if (output !== undefined) {
    file = createWriteStream(output, { flags: "w", mode: 0o644 });
    try {
      await once(file, "open");
    } catch (err) {
      throw new UsageError(`cannot write ${output}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    stream = file;
  }
  let written = 0;
  try {
    for (; !next.done; next = await records.next()) {
      if (!stream.write(`${JSON.stringify(next.value)}\n`)) await once(stream, "drain");
      written++;
    }
  } finally {
    if (file) {
      file.end();
      await once(file, "close");
    }
  }
  return written;
}

const run: Command = {
  name: "run",
  summary: "Run a JSONL file as a batch: create, upload, submit, wait, write the results",
  usage: "svc batches run FILE [--output FILE] [--idempotency-key KEY] [--metadata KEY=VALUE ...] [--poll-interval SECONDS]",
  description: [
    'FILE holds one {"custom_id": "...", "body": <a decision request>} per line (at most 25 MiB and',
    "10,000 records); it is checked before anything is sent. Results are written in input order as",
    "JSONL to standard output or --output. The same --idempotency-key finds the same batch again, so",
    "an interrupted run resumes with it. Ctrl-C stops waiting (exit 130) and leaves the batch running.",
    "Exit 0 when the batch completed (records that failed are error lines in the results), 1 when it",
    "failed, was cancelled or expired (committed results are still written).",
    "",
    "--metadata team=support --metadata ticket=OPS-12 labels the batch with your own pairs, shown by",
    "`svc batches status` and in `--json` output.",
  ].join("\n"),
  options: {
    output: { type: "string", short: "o", value: "FILE", help: "write the results here instead of standard output" },
    "idempotency-key": { type: "string", value: "KEY", help: "resume the batch this key created (default: a new batch)" },
    ...metadataOption(BATCH),
    "poll-interval": { type: "string", value: "SECONDS", help: `seconds between status checks (default ${POLL_SECONDS})` },
  },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const seconds = pollSeconds(values);
    const { client, batch: submitted, progress } = await createAndSubmit(ctx, positionals[0]!, idempotencyKey(values), metadataOf(values));
    const batch = await follow(ctx, BATCH, client, submitted, seconds, progress);
    if (batch.status === "failed") throw new Failure(`batch ${batch.id} failed: ${errorText(batch.error)}`);
    const written = await writeResults(ctx, client.batches.results(batch.id, {}, { signal: ctx.signal }), values.output as string | undefined);
    ctx.status(`Batch ${batch.id} ${batch.status}: ${counts(batch)}; ${written} result${written === 1 ? "" : "s"} written${values.output ? ` to ${values.output}` : ""}.`);
    if (batch.status !== "completed") throw new Failure(`batch ${batch.id} was ${batch.status} before every record ran; the committed results were written`);
  },
};

const create: Command = {
  name: "create",
  summary: "Create a batch from a JSONL file, upload it and submit it; prints the batch id",
  usage: "svc batches create FILE [--idempotency-key KEY] [--metadata KEY=VALUE ...] [--json]",
  description: [
    "The file is checked first, as for `svc batches run`. Follow the batch with `svc batches status ID`",
    "and read it with `svc batches results ID`. --metadata (once per pair) labels the batch.",
  ].join("\n"),
  options: {
    "idempotency-key": { type: "string", value: "KEY", help: "the same key returns the same batch (default: a new batch)" },
    ...metadataOption(BATCH),
    ...jsonOption(BATCH, "print the batch object as JSON instead of its id"),
  },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const { batch } = await createAndSubmit(ctx, positionals[0]!, idempotencyKey(values), metadataOf(values));
    printJob(ctx, values.json === true, batch, batch.id);
  },
};

function describeBatch(batch: Batch): string[] {
  return formatRows([
    ["id", batch.id],
    ["status", batch.status],
    ["records", counts(batch)],
    ...lifecycleRows(batch),
    ["results until", batch.results_expire_at],
    ["rate", batch.progress ? `${batch.progress.records_per_minute.toFixed(1)} records/min` : null],
    ["estimated end", batch.progress?.estimated_completion_at],
    ["error", batch.error ? errorText(batch.error) : null],
  ]);
}

const status = statusCommand(BATCH, "Show a batch's status, record counts and times", describeBatch);
const cancel = cancelCommand(BATCH, "Cancel a batch that has not finished (committed results stay readable)");
const list = listCommand(BATCH);

const results: Command = {
  name: "results",
  summary: "Write a finished batch's results as JSONL",
  usage: "svc batches results ID [--output FILE]",
  description: "One line per committed record, in input order: {custom_id, response} or {custom_id, error}. Only a finished batch has results.",
  options: { output: { type: "string", short: "o", value: "FILE", help: "write the results here instead of standard output" } },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const written = await writeResults(ctx, ctx.client().batches.results(positionals[0]!, {}, { signal: ctx.signal }), values.output as string | undefined);
    ctx.status(`${written} result${written === 1 ? "" : "s"} written${values.output ? ` to ${values.output}` : ""}.`);
  },
};

export const batches: Group = {
  name: "batches",
  summary: "Bulk jobs: run a JSONL file of decision requests as a batch",
  commands: [run, create, status, cancel, list, results],
};
