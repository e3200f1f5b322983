/**
 * The job lifecycle that `svc batches` and `svc train` share (runs in a user's terminal). A job is
 * made from a file: created with an idempotency key, the file PUT to its signed upload address under
 * a progress bar, submitted; then followed until it ends, with a bar while standard error is a
 * terminal and a line per change of status otherwise (Ctrl-C stops the waiting, not the job). Its
 * `status`, `cancel` and `list` commands are the same for every kind.
 *
 * A kind says only what differs: the credential its client takes, its SDK resource, its statuses
 * (which `list --status` takes), and how one of its jobs reads in a line, in the bar and in a list.
 * Every job may carry the caller's metadata (`--metadata key=value` at create), shown by `status`:
 *
 *     const { client, job, progress } = await submitJob(ctx, BATCH, (client) => ...create, upload, submit...);
 *     const done = await follow(ctx, BATCH, client, job, pollSeconds(values), progress);
 *     export const batches: Group = { ..., commands: [run, create, statusCommand(BATCH, ...), cancelCommand(BATCH, ...), listCommand(BATCH)] };
 */
import { randomUUID } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import type { Command, Option, Parsed } from "./command.ts";
import type { Context } from "./context.ts";
import { Interrupted, UsageError } from "./errors.ts";
import { formatBytes, formatDuration, Progress } from "./progress.ts";
import { APIUserAbortError, METADATA_LIMITS, type Client, type ClientOptions, type CursorPage, type Metadata, type RequestOptions } from "./sdk.ts";
import { uploadProgressFetch } from "./upload-progress.ts";

/** What every job has, whatever its kind (contract/batches.ts, contract/trainings.ts). */
export interface Job {
  id: string;
  status: string;
  idempotency_key: string;
  /** The caller's string pairs given at create; null when none were. */
  metadata: Metadata | null;
  created_at: string;
  submitted_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  /** The deadline: a job not finished by then expires. */
  expires_at: string;
  error: { code: string; message: string; line: number | null } | null;
}

/** The calls of an SDK resource that every kind of job answers (`client.batches`, `client.trainings`). */
export interface JobResource<J extends Job> {
  retrieve(id: string, options?: RequestOptions): Promise<J>;
  cancel(id: string, options?: RequestOptions): Promise<J>;
  list(params: { limit?: number | undefined; after?: string | undefined; status?: J["status"] | undefined }, options?: RequestOptions): PromiseLike<CursorPage<J>>;
  wait(id: string, options: { signal?: AbortSignal; pollInterval?: number; onProgress?: (job: J) => void }): Promise<J>;
}

export interface JobKind<J extends Job> {
  /** One job, in messages and help: `batch`, `training`. */
  noun: string;
  /** Several: `batches`, `trainings`. */
  plural: string;
  /** The command group: `batches` (`svc batches ...`), `train`. */
  group: string;
  /** The list's page sizes, from the contract. */
  page: { readonly default: number; readonly max: number };
  /** Every status a job of the kind may be in, from the contract: what `list --status` takes. */
  statuses: readonly J["status"][];
  /** A client with the kind's credential (the API key, or the browser sign-in). */
  client(ctx: Context, options?: Pick<ClientOptions, "fetch">): Client;
  resource(client: Client): JobResource<J>;
  /** Whether the job has ended: waiting stops there. */
  ended(job: J): boolean;
  /** The status and how far the job got, in one line (`running: 2 of 3 records done`). */
  line(job: J): string;
  /** The bar while the job runs (a fraction, or null for words alone); null while the status is all there is to show. */
  bar(job: J): { fraction: number | null; text: string } | null;
  /** A list line's middle, between the status and the creation time. */
  listed(job: J): string;
  /** The sub-commands that find a job again after Ctrl-C stopped the waiting for it. */
  followUp: string[];
}

/** Seconds between status checks while waiting, unless --poll-interval says otherwise. */
export const POLL_SECONDS = 2;

/** `Batch`, `Training`: the noun at the start of a line. */
const title = (kind: { noun: string }) => kind.noun[0]!.toUpperCase() + kind.noun.slice(1);

/** --json on a command that prints one job. */
export const jsonOption = (kind: { noun: string }, help = `print the ${kind.noun} object as JSON`): Record<string, Option> => ({ json: { type: "boolean", help } });

/** A job's file, read whole when it is at most `maxBytes`; a UsageError (exit 2) says why not. */
export async function readJobFile(path: string, noun: string, maxBytes: number): Promise<Buffer> {
  try {
    const info = await stat(path);
    if (!info.isFile()) throw new UsageError(`${path} is not a file`);
    if (info.size > maxBytes) throw new UsageError(`${path} is ${info.size} bytes; a ${noun} file holds at most ${maxBytes} bytes`);
    return await readFile(path);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(`cannot read ${path}: ${code === "ENOENT" ? "no such file" : (code ?? (err as Error).message)}`);
  }
}

/** --poll-interval in seconds, checked. */
export function pollSeconds(values: Parsed["values"]): number {
  const seconds = Number(values["poll-interval"] ?? POLL_SECONDS);
  if (!(seconds > 0) || !Number.isFinite(seconds)) throw new UsageError("--poll-interval is a number of seconds, more than 0");
  return seconds;
}

/** --metadata KEY=VALUE, once per pair (the contract's METADATA_LIMITS say how many and how long). */
export const metadataOption = (kind: { noun: string }): Record<string, Option> => ({
  metadata: {
    type: "string",
    multiple: true,
    value: "KEY=VALUE",
    help: `a label of your own on the ${kind.noun}, once per pair (at most ${METADATA_LIMITS.pairs}; keys 1-${METADATA_LIMITS.keyChars} characters, values up to ${METADATA_LIMITS.valueChars})`,
  },
});

/**
 * The --metadata pairs as the object to send, or undefined when none were given; a UsageError (exit
 * 2) for a pair without `=`, a key given twice, or pairs beyond the contract's limits, before
 * anything is sent. The value is everything after the first `=` (it may hold `=` and be empty).
 */
export function metadataOf(values: Parsed["values"]): Metadata | undefined {
  const pairs = values.metadata as string[] | undefined;
  if (pairs === undefined) return undefined;
  const metadata: Metadata = {};
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    if (at < 0) throw new UsageError("--metadata is KEY=VALUE (a key, then =, then its value)");
    const [key, value] = [pair.slice(0, at), pair.slice(at + 1)];
    if (key.length < 1 || key.length > METADATA_LIMITS.keyChars) throw new UsageError(`a --metadata key is 1 to ${METADATA_LIMITS.keyChars} characters`);
    if (value.length > METADATA_LIMITS.valueChars) throw new UsageError(`a --metadata value is at most ${METADATA_LIMITS.valueChars} characters (the one of ${printable(key)} is ${value.length})`);
    if (Object.hasOwn(metadata, key)) throw new UsageError(`--metadata ${printable(key)} is given twice`);
    metadata[key] = value;
  }
  if (Object.keys(metadata).length > METADATA_LIMITS.pairs) throw new UsageError(`at most ${METADATA_LIMITS.pairs} --metadata pairs`);
  return metadata;
}

/** Text as one printable line: control characters escaped (`\u001b`), so a label cannot move the terminal's cursor. */
function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** --idempotency-key, or a new key (a new job). */
export const idempotencyKey = (values: Parsed["values"]): string => (values["idempotency-key"] as string | undefined) ?? `svc-${randomUUID()}`;

/** `code (line N): message`, or that the service gave none. */
export function errorText(error: Job["error"]): string {
  return error ? `${error.code}${error.line ? ` (line ${error.line})` : ""}: ${error.message}` : "no reason given";
}

/** ` · about 3 min 5 s left`, or nothing without an estimate. */
export const timeLeft = (at: string | null | undefined): string => (at ? ` · about ${formatDuration(Date.parse(at) - Date.now())} left` : "");

/**
 * Makes a job with a client of its kind whose uploads draw the bar: `send` creates it, PUTs its file
 * (unless the file arrived before, under the same idempotency key) and submits it. Says that the file
 * went up, or that it was there already, then the job's status.
 */
export async function submitJob<J extends Job>(ctx: Context, kind: JobKind<J>, send: (client: Client) => Promise<J>): Promise<{ client: Client; job: J; progress: Progress }> {
  const progress = new Progress(ctx.stderr);
  let uploaded: number | null = null;
  const client = kind.client(ctx, {
    fetch: uploadProgressFetch((sent, total) => {
      uploaded = total;
      progress.update(total === 0 ? 1 : sent / total, `uploading ${formatBytes(sent)} of ${formatBytes(total)}`);
    }),
  });
  const job = await send(client);
  if (uploaded === null) {
    ctx.status("Its input had already arrived; submitting it.");
  } else {
    progress.done(`uploaded ${formatBytes(uploaded)}`);
    if (!progress.enabled) ctx.status(`Uploaded ${formatBytes(uploaded)}.`);
  }
  ctx.status(`${title(kind)} ${job.id}: ${job.status}.`);
  return { client, job, progress };
}

/**
 * Polls the job until it ends, drawing `progress` (without a terminal, a line per change of status),
 * and ends the bar with the job's last line. Ctrl-C stops the waiting (exit 130) and says how to find
 * the job again; the job goes on.
 */
export async function follow<J extends Job>(ctx: Context, kind: JobKind<J>, client: Client, submitted: J, seconds: number, progress: Progress): Promise<J> {
  let last = submitted.status;
  let done: J;
  try {
    done = await kind.resource(client).wait(submitted.id, {
      signal: ctx.signal,
      pollInterval: seconds * 1000,
      onProgress: (current) => {
        const { fraction, text } = kind.bar(current) ?? { fraction: null, text: `${kind.noun} ${current.status}${kind.ended(current) ? "" : "..."}` };
        progress.update(fraction, text, current.status !== last);
        if (!progress.enabled && current.status !== last) ctx.status(`${title(kind)} ${kind.line(current)}.`);
        last = current.status;
      },
    });
  } catch (err) {
    if (err instanceof APIUserAbortError || ctx.signal.aborted) {
      progress.done();
      const commands = kind.followUp.map((command) => `\`svc ${kind.group} ${command} ${submitted.id}\``);
      ctx.status(`Stopped waiting. ${title(kind)} ${submitted.id} keeps running: ${commands.slice(0, -1).join(", ")}, or ${commands.at(-1)}.`);
      throw new Interrupted();
    }
    throw err;
  }
  progress.done(`${kind.noun} ${kind.line(done)}`);
  return done;
}

/** A job as JSON with --json, else as `text`. */
export function printJob(ctx: Context, json: boolean, job: Job, text: string): void {
  ctx.stdout.write(json ? `${JSON.stringify(job)}\n` : `${text}\n`);
}

export type Rows = Array<[string, string | null | undefined]>;

/** A job's metadata in `status`: `key: value` a row, the first labelled `metadata`; none when it has none. */
export function metadataRows(job: Job): Rows {
  return Object.entries(job.metadata ?? {}).map(([key, value], n) => [n === 0 ? "metadata" : "", `${printable(key)}: ${printable(value)}`]);
}

/** The rows every job has in `status`, after its kind's first ones: its key, metadata and times. */
export function lifecycleRows(job: Job): Rows {
  return [
    ["idempotency key", job.idempotency_key],
    ...metadataRows(job),
    ["created", job.created_at],
    ["submitted", job.submitted_at],
    ["started", job.started_at],
    ["finished", job.finished_at],
    // Once the job has finished, its deadline no longer says anything.
    ["deadline", job.finished_at ? null : job.expires_at],
  ];
}

/** The labels' column: the longest label, `idempotency key`, and a space. */
const LABEL_WIDTH = 16;

/** `status` output: a row a line, label then value; rows without a value are left out. */
export function formatRows(rows: Rows): string[] {
  return rows.filter(([, value]) => value !== null && value !== undefined).map(([label, value]) => `${label.padEnd(LABEL_WIDTH)}${value}`);
}

/** `svc <group> status ID`: the job as `describe` writes it, or its JSON. */
export function statusCommand<J extends Job>(kind: JobKind<J>, summary: string, describe: (job: J, ctx: Context, client: Client) => Promise<string[]> | string[]): Command {
  return {
    name: "status",
    summary,
    usage: `svc ${kind.group} status ID [--json]`,
    options: jsonOption(kind),
    positionals: { min: 1, max: 1 },
    async run(ctx, { values, positionals }) {
      const client = kind.client(ctx);
      const job = await kind.resource(client).retrieve(positionals[0]!, { signal: ctx.signal });
      if (values.json) ctx.stdout.write(`${JSON.stringify(job)}\n`);
      else ctx.stdout.write(`${(await describe(job, ctx, client)).join("\n")}\n`);
    },
  };
}

/** `svc <group> cancel ID`: the job after the cancel, in one line or as JSON. */
export function cancelCommand<J extends Job>(kind: JobKind<J>, summary: string): Command {
  return {
    name: "cancel",
    summary,
    usage: `svc ${kind.group} cancel ID [--json]`,
    options: jsonOption(kind),
    positionals: { min: 1, max: 1 },
    async run(ctx, { values, positionals }) {
      const job = await kind.resource(kind.client(ctx)).cancel(positionals[0]!, { signal: ctx.signal });
      printJob(ctx, values.json === true, job, `${job.id} ${kind.line(job)}`);
    },
  };
}

/** `svc <group> list`: one page of the account's jobs (of one status with --status), newest first, and the cursor of the next. */
export function listCommand<J extends Job>(kind: JobKind<J>): Command {
  return {
    name: "list",
    summary: `List the account's ${kind.plural}, newest first`,
    usage: `svc ${kind.group} list [--status STATUS] [--limit N] [--after ID] [--json]`,
    description: `--status lists only the ${kind.plural} in that status: ${kind.statuses.join(", ")}.`,
    options: {
      status: { type: "string", value: "STATUS", help: `only the ${kind.plural} in this status (${kind.statuses.join(", ")})` },
      limit: { type: "string", value: "N", help: `${kind.plural} per page, 1 to ${kind.page.max} (default ${kind.page.default})` },
      after: { type: "string", value: "ID", help: `the page after this ${kind.noun} (the cursor a previous page printed)` },
      json: { type: "boolean", help: "print the response JSON" },
    },
    async run(ctx, { values }) {
      const limit = values.limit === undefined ? undefined : Number(values.limit);
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= kind.page.max)) throw new UsageError(`--limit is an integer from 1 to ${kind.page.max}`);
      const status = values.status as string | undefined;
      if (status !== undefined && !(kind.statuses as readonly string[]).includes(status)) {
        throw new UsageError(`--status is one of ${kind.statuses.join(", ")}`);
      }
      const page = await kind.resource(kind.client(ctx)).list({ limit, after: values.after as string | undefined, status: status as J["status"] | undefined }, { signal: ctx.signal });
      if (values.json) {
        ctx.stdout.write(`${JSON.stringify(page)}\n`);
        return;
      }
      if (page.data.length === 0) ctx.stdout.write(`No ${kind.plural}${status === undefined ? "" : ` ${status}`}.\n`);
      for (const job of page.data) ctx.stdout.write(`${job.id}  ${job.status.padEnd(10)}  ${kind.listed(job)}  ${job.created_at}\n`);
      if (page.has_more && page.next_cursor) ctx.status(`More: svc ${kind.group} list${status === undefined ? "" : ` --status ${status}`} --after ${page.next_cursor}`);
    },
  };
}
