/**
 * `svc batches ...` (runs in a user's terminal): bulk jobs from a JSONL file.
 *
 *     svc batches run tickets.jsonl --output results.jsonl   create, upload, submit, wait, write results
 *     svc batches create tickets.jsonl                        create, upload and submit; prints the id
 *     svc batches status ID | cancel ID | list | results ID
 *
 * Progress bars (upload, then records done and the estimated time left) are drawn only when
 * standard error is a terminal; otherwise each step is one line on standard error. Results are JSONL
 * on standard output or in --output FILE, one `{custom_id, response}` or `{custom_id, error}` a line.
 */
import { randomUUID } from "node:crypto";
import { createWriteStream, type WriteStream } from "node:fs";
import { once } from "node:events";
import { readBatchFile } from "../batch-file.ts";
import type { Command, Group } from "../command.ts";
import type { Context } from "../context.ts";
import { Failure, Interrupted, UsageError } from "../errors.ts";
import { formatBytes, formatDuration, Progress } from "../progress.ts";
import { BATCH_LIST_PAGE } from "../../../../contract/batches.ts";
import { APIUserAbortError, type Batch, type Client, type ResultStream } from "../sdk.ts";
import { uploadProgressFetch } from "../upload-progress.ts";

const POLL_SECONDS = 2;

function counts(batch: Batch): string {
  const { total, completed, failed } = batch.request_counts;
  return `${completed + failed} of ${total} records done${failed > 0 ? ` (${failed} failed)` : ""}`;
}

/** Creates the batch, uploads the file with a progress bar, and submits it. */
async function createAndSubmit(ctx: Context, file: string, key: string | undefined): Promise<{ client: Client; batch: Batch; progress: Progress }> {
  const { bytes, records } = await readBatchFile(file);
  const progress = new Progress(ctx.stderr);
  const client = ctx.client({ fetch: uploadProgressFetch((sent, total) => progress.update(total === 0 ? 1 : sent / total, `uploading ${formatBytes(sent)} of ${formatBytes(total)}`)) });
  const idempotencyKey = key ?? `svc-${randomUUID()}`;
  const created = await client.batches.create({ idempotencyKey }, { signal: ctx.signal });
  ctx.status(`Batch ${created.id} (idempotency key ${idempotencyKey}): ${records} record${records === 1 ? "" : "s"} from ${file}.`);
  if (created.upload) {
    await client.batches.upload(created, bytes, { signal: ctx.signal });
    progress.done(`uploaded ${formatBytes(bytes.byteLength)}`);
    if (!progress.enabled) ctx.status(`Uploaded ${formatBytes(bytes.byteLength)}.`);
  } else {
    ctx.status("Its input had already arrived; submitting it.");
  }
  const batch = await client.batches.submit(created.id, { signal: ctx.signal });
  ctx.status(`Submitted: ${batch.status}.`);
  return { client, batch, progress };
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

function waitText(batch: Batch): { fraction: number | null; text: string } {
  const { total, completed, failed } = batch.request_counts;
  const eta = batch.progress?.estimated_completion_at;
  const left = eta ? ` · about ${formatDuration(Date.parse(eta) - Date.now())} left` : "";
  if (batch.status !== "running" || total === 0) return { fraction: null, text: `batch ${batch.status}...` };
  return { fraction: (completed + failed) / total, text: `${counts(batch)}${left}` };
}

const run: Command = {
  name: "run",
  summary: "Run a JSONL file as a batch: create, upload, submit, wait, write the results",
  usage: "svc batches run FILE [--output FILE] [--idempotency-key KEY] [--poll-interval SECONDS]",
  description: [
    'FILE holds one {"custom_id": "...", "body": <a decision request>} per line (at most 25 MiB and',
    "10,000 records); it is checked before anything is sent. Results are written in input order as",
    "JSONL to standard output or --output. The same --idempotency-key finds the same batch again, so",
    "an interrupted run resumes with it. Ctrl-C stops waiting (exit 130) and leaves the batch running.",
    "Exit 0 when the batch completed (records that failed are error lines in the results), 1 when it",
    "failed, was cancelled or expired (committed results are still written).",
  ].join("\n"),
  options: {
    output: { type: "string", short: "o", value: "FILE", help: "write the results here instead of standard output" },
    "idempotency-key": { type: "string", value: "KEY", help: "resume the batch this key created (default: a new batch)" },
    "poll-interval": { type: "string", value: "SECONDS", help: `seconds between status checks (default ${POLL_SECONDS})` },
  },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const interval = Number(values["poll-interval"] ?? POLL_SECONDS);
    if (!(interval > 0) || !Number.isFinite(interval)) throw new UsageError("--poll-interval is a number of seconds, more than 0");
    const { client, batch: submitted, progress } = await createAndSubmit(ctx, positionals[0]!, values["idempotency-key"] as string | undefined);
    let lastStatus = submitted.status;
    let batch: Batch;
    try {
      batch = await client.batches.wait(submitted.id, {
        signal: ctx.signal,
        pollInterval: interval * 1000,
        onProgress: (current) => {
          const { fraction, text } = waitText(current);
          progress.update(fraction, text, current.status !== lastStatus);
          if (!progress.enabled && current.status !== lastStatus) ctx.status(`Batch ${current.status}: ${counts(current)}.`);
          lastStatus = current.status;
        },
      });
    } catch (err) {
      if (err instanceof APIUserAbortError || ctx.signal.aborted) {
        progress.done();
        ctx.status(`Stopped waiting. Batch ${submitted.id} keeps running: \`svc batches status ${submitted.id}\`, \`svc batches results ${submitted.id}\`, or \`svc batches cancel ${submitted.id}\`.`);
        throw new Interrupted();
      }
      throw err;
    }
    progress.done(`batch ${batch.status}: ${counts(batch)}`);
    if (batch.status === "failed") {
      const where = batch.error?.line ? ` (line ${batch.error.line})` : "";
      throw new Failure(`batch ${batch.id} failed: ${batch.error ? `${batch.error.code}${where}: ${batch.error.message}` : "no reason given"}`);
    }
    const written = await writeResults(ctx, client.batches.results(batch.id, {}, { signal: ctx.signal }), values.output as string | undefined);
    ctx.status(`Batch ${batch.id} ${batch.status}: ${counts(batch)}; ${written} result${written === 1 ? "" : "s"} written${values.output ? ` to ${values.output}` : ""}.`);
    if (batch.status !== "completed") throw new Failure(`batch ${batch.id} was ${batch.status} before every record ran; the committed results were written`);
  },
};

const create: Command = {
  name: "create",
  summary: "Create a batch from a JSONL file, upload it and submit it; prints the batch id",
  usage: "svc batches create FILE [--idempotency-key KEY] [--json]",
  description: "The file is checked first, as for `svc batches run`. Follow the batch with `svc batches status ID` and read it with `svc batches results ID`.",
  options: {
    "idempotency-key": { type: "string", value: "KEY", help: "the same key returns the same batch (default: a new batch)" },
    json: { type: "boolean", help: "print the batch object as JSON instead of its id" },
  },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const { batch } = await createAndSubmit(ctx, positionals[0]!, values["idempotency-key"] as string | undefined);
    ctx.stdout.write(values.json ? `${JSON.stringify(batch)}\n` : `${batch.id}\n`);
  },
};

function describeBatch(batch: Batch): string {
  const rows: Array<[string, string | null | undefined]> = [
    ["id", batch.id],
    ["status", batch.status],
    ["records", counts(batch)],
    ["idempotency key", batch.idempotency_key],
    ["created", batch.created_at],
    ["submitted", batch.submitted_at],
    ["started", batch.started_at],
    ["finished", batch.finished_at],
    ["deadline", batch.expires_at],
    ["results until", batch.results_expire_at],
    ["rate", batch.progress ? `${batch.progress.records_per_minute.toFixed(1)} records/min` : null],
    ["estimated end", batch.progress?.estimated_completion_at],
    ["error", batch.error ? `${batch.error.code}${batch.error.line ? ` (line ${batch.error.line})` : ""}: ${batch.error.message}` : null],
  ];
  return rows
    .filter(([, value]) => value !== null && value !== undefined)
    .map(([name, value]) => `${name.padEnd(15)}${value}`)
    .join("\n");
}

const status: Command = {
  name: "status",
  summary: "Show a batch's status, record counts and times",
  usage: "svc batches status ID [--json]",
  options: { json: { type: "boolean", help: "print the batch object as JSON" } },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const batch = await ctx.client().batches.retrieve(positionals[0]!, { signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify(batch)}\n` : `${describeBatch(batch)}\n`);
  },
};

const cancel: Command = {
  name: "cancel",
  summary: "Cancel a batch that has not finished (committed results stay readable)",
  usage: "svc batches cancel ID [--json]",
  options: { json: { type: "boolean", help: "print the batch object as JSON" } },
  positionals: { min: 1, max: 1 },
  async run(ctx, { values, positionals }) {
    const batch = await ctx.client().batches.cancel(positionals[0]!, { signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify(batch)}\n` : `${batch.id} ${batch.status}: ${counts(batch)}\n`);
  },
};

const list: Command = {
  name: "list",
  summary: "List the account's batches, newest first",
  usage: "svc batches list [--limit N] [--after ID] [--json]",
  options: {
    limit: { type: "string", value: "N", help: `batches per page, 1 to ${BATCH_LIST_PAGE.max} (default ${BATCH_LIST_PAGE.default})` },
    after: { type: "string", value: "ID", help: "the page after this batch (the cursor a previous page printed)" },
    json: { type: "boolean", help: "print the response JSON" },
  },
  async run(ctx, { values }) {
    const limit = values.limit === undefined ? undefined : Number(values.limit);
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= BATCH_LIST_PAGE.max)) throw new UsageError(`--limit is an integer from 1 to ${BATCH_LIST_PAGE.max}`);
    const page = await ctx.client().batches.list({ limit, after: values.after as string | undefined }, { signal: ctx.signal });
    if (values.json) {
      ctx.stdout.write(`${JSON.stringify(page)}\n`);
      return;
    }
    if (page.data.length === 0) ctx.stdout.write("No batches.\n");
    for (const batch of page.data) ctx.stdout.write(`${batch.id}  ${batch.status.padEnd(10)}  ${counts(batch).padEnd(32)}  ${batch.created_at}\n`);
    if (page.has_more && page.next_cursor) ctx.status(`More: svc batches list --after ${page.next_cursor}`);
  },
};

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
