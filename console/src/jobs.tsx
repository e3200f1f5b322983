/**
 * The job lifecycle that the batch and training pages share (runs in the browser): a job made from a
 * file (created, its file PUT through the signed upload with the progress shown, submitted); the
 * account's jobs, newest first, a page at a time; and an open job, read again every few seconds until
 * it ends, with its status, its metadata (the caller's own pairs, given at create), its error and its
 * cancellation after a confirmation.
 *
 * A kind says only what differs: its path and credential, its schemas, which statuses end it or may
 * be cancelled, and its words. A page adds its own columns and what an open job shows:
 *
 *     const jobs = useJobList(BATCHES);
 *     <JobList kind={BATCHES} jobs={jobs} columns={[{ header: "Records", cell: (batch) => ... }]} />
 *     {jobs.open && <JobDetail kind={BATCHES} id={jobs.open} onChange={jobs.reload} body={(batch) => ...} footer={(batch) => ...} />}
 */
import { Badge, Box, Button, Card, Code, Flex, Heading, Progress, Table, Text } from "@radix-ui/themes";
import { useCallback, useEffect, useRef, useState, type ComponentProps, type ReactNode } from "react";
import type { Upload } from "../../contract/batches.ts";
import { call, describe, upload } from "./api.ts";
import { ConfirmDialog, ErrorCallout } from "./components.tsx";
import { useConsole, type ConsoleState } from "./state.ts";

/** How often an open job is read again. */
const POLL_MS = 2000;

/** What every job has, whatever its kind (contract/batches.ts, contract/trainings.ts). */
export interface Job {
  id: string;
  status: string;
  /** The caller's string pairs given at create; null when none were. */
  metadata: Record<string, string> | null;
  created_at: string;
  error: { code: string; message: string; line: number | null } | null;
}

export interface JobPage<J extends Job> {
  data: J[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface JobKind<J extends Job> {
  /** Where its routes are: `/v1/batches`, `/v1/trainings`. */
  path: string;
  /** One job, in labels: `batch`, `training`. */
  noun: string;
  /** Several: `batches`, `trainings`. */
  plural: string;
  /** The list's name: the page's heading. */
  heading: string;
  /** The status column's heading. */
  statusHeading: string;
  schema: { parse(value: unknown): J };
  listSchema: { parse(value: unknown): JobPage<J> };
  /** The credential its routes take: the API key, or the signed-in session's token. */
  credential(state: ConsoleState): string;
  /** Whether the job has ended: reading it again stops there. */
  ended(job: J): boolean;
  /** Whether it may still be cancelled. */
  cancellable(job: J): boolean;
  /** What cancelling does, said in the confirmation. */
  cancelWarning: string;
  /** The status in the page's words (the status itself when absent). */
  words?(status: J["status"]): string;
}

type BadgeColor = ComponentProps<typeof Badge>["color"];

/** Ended well: green; passed but not yet serving: teal; ended badly: red; stopped: grey; else under way: indigo. */
const STATUS_COLORS: Record<string, BadgeColor> = { completed: "green", ready: "green", accepted: "teal", rejected: "red", failed: "red", expired: "red", cancelled: "gray" };

const title = (kind: { noun: string }) => kind.noun[0]!.toUpperCase() + kind.noun.slice(1);

/** `, done by about 14:05:00`, or nothing without an estimate. */
export const doneBy = (at: string | null | undefined): string => (at ? `, done by about ${new Date(at).toLocaleTimeString()}` : "");

/**
 * The create, upload and submit of a job of `kind` with `credential`; its id. The create declares the
 * file's size, which its signed upload is bound to: the browser sends that very length with the file.
 */
export async function startJob(kind: JobKind<Job>, credential: string, create: Record<string, unknown>, file: File, progress: (bytes: number) => void): Promise<string> {
  const body = JSON.stringify({ idempotency_key: crypto.randomUUID(), input_bytes: file.size, ...create });
  const created = (await call(kind.path, credential, { body })).plain as { id: string; upload?: Upload };
  if (created.upload) await upload(created.upload.url, created.upload.headers, file, progress);
  await call(`${kind.path}/${created.id}/submit`, credential, { method: "POST" });
  return created.id;
}

/** A file chosen and made into a job by `start`, the upload's progress shown meanwhile. */
export function JobFileForm(props: { inputId: string; label: ReactNode; button: string; disabled?: boolean; children?: ReactNode; start(file: File, progress: (bytes: number) => void): Promise<void> }) {
  const [file, setFile] = useState<File | null>(null);
  const [sent, setSent] = useState<number | null>(null);
  const [error, setError] = useState<string | null>(null);
  const input = useRef<HTMLInputElement>(null);

  async function submit(event: React.FormEvent) {
    event.preventDefault();
    if (!file) return;
    setError(null);
    setSent(0);
    try {
      await props.start(file, setSent);
      setFile(null);
      if (input.current) input.current.value = "";
    } catch (err) {
      setError(describe(err));
    } finally {
      setSent(null);
    }
  }

  const share = file && sent !== null ? (100 * sent) / Math.max(file.size, 1) : 0;
  return (
    <Card>
      <form onSubmit={(event) => void submit(event)}>
        <Flex direction="column" gap="2">
          {props.children}
          <Text as="label" htmlFor={props.inputId} weight="medium">
            {props.label}
          </Text>
          <input ref={input} id={props.inputId} type="file" accept=".jsonl,application/jsonl,application/x-ndjson,text/plain" onChange={(event) => setFile(event.target.files?.[0] ?? null)} />
          {sent !== null && file && (
            <Box>
              <Text as="p" size="2" id={`${props.inputId}-progress`}>
                Uploading: {Math.round(share)} % of {file.size.toLocaleString()} bytes
              </Text>
              <Progress value={share} aria-labelledby={`${props.inputId}-progress`} />
            </Box>
          )}
          <ErrorCallout error={error} />
          <Box>
            <Button type="submit" disabled={!file || sent !== null || props.disabled}>
              {props.button}
            </Button>
          </Box>
        </Flex>
      </form>
    </Card>
  );
}

/**
 * Reads a job now and every few seconds until `ended` says so, then calls `onEnded` once. A new
 * `onEnded` (the parent's refresh, a new function each render) does not restart the reading.
 */
export function usePolledJob<T>(read: () => Promise<T | null>, ended: (job: T) => boolean, onEnded: () => void): void {
  const latest = useRef(onEnded);
  latest.current = onEnded;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      const job = await read();
      if (stopped) return;
      if (job && ended(job)) latest.current();
      else timer = setTimeout(() => void tick(), POLL_MS);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [read, ended]);
}

/** The account's jobs of a kind as the page shows them: a page of the list, and the job opened. */
export interface JobListState<J extends Job> {
  list: JobPage<J> | null;
  error: string | null;
  /** Reads the first page, or the page after the `after` cursor. */
  load(after?: string): Promise<void>;
  /** Reads the first page again (a job changed). */
  reload(): void;
  open: string | null;
  setOpen(id: string): void;
  /** Opens a job just made, and reads the list again. */
  created(id: string): void;
}

export function useJobList<J extends Job>(kind: JobKind<J>): JobListState<J> {
  const credential = kind.credential(useConsole());
  const [list, setList] = useState<JobPage<J> | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(
    async (after?: string) => {
      setError(null);
      try {
        setList(kind.listSchema.parse((await call(`${kind.path}${after ? `?after=${encodeURIComponent(after)}` : ""}`, credential)).plain));
      } catch (err) {
        setError(describe(err));
      }
    },
    [kind, credential],
  );
  const reload = () => void load();
  const created = (id: string) => {
    setOpen(id);
    void load();
  };
  return { list, error, load, reload, open, setOpen, created };
}

export function JobBadge<J extends Job>({ kind, status }: { kind: JobKind<J>; status: J["status"] }) {
  return (
    <Badge color={STATUS_COLORS[status] ?? "indigo"} highContrast>
      {kind.words ? kind.words(status) : status}
    </Badge>
  );
}

/** A column a kind adds to the list, between the status and the creation time. */
export interface JobColumn<J extends Job> {
  header: string;
  cell(job: J): ReactNode;
  /** Shown on wide screens only. */
  wide?: boolean;
}

/** The list's page as a table, each job opened from its id, and the button to the older ones. */
export function JobList<J extends Job>({ kind, jobs, columns }: { kind: JobKind<J>; jobs: JobListState<J>; columns: JobColumn<J>[] }) {
  const { list } = jobs;
  if (!list) return null;
  const wide = (column: JobColumn<J>) => (column.wide ? "wide-only" : undefined);
  return (
    <>
      <Table.Root variant="surface">
        <caption className="visually-hidden">{kind.heading}</caption>
        <Table.Header>
          <Table.Row>
            <Table.ColumnHeaderCell>{title(kind)}</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>{kind.statusHeading}</Table.ColumnHeaderCell>
            {columns.map((column) => (
              <Table.ColumnHeaderCell key={column.header} className={wide(column)}>
                {column.header}
              </Table.ColumnHeaderCell>
            ))}
            <Table.ColumnHeaderCell className="wide-only">Created</Table.ColumnHeaderCell>
          </Table.Row>
        </Table.Header>
        <Table.Body>
          {list.data.length === 0 && (
            <Table.Row>
              <Table.Cell colSpan={columns.length + 3}>No {kind.plural} yet.</Table.Cell>
            </Table.Row>
          )}
          {list.data.map((job) => (
            <Table.Row key={job.id}>
              <Table.RowHeaderCell>
                <Button variant="ghost" onClick={() => jobs.setOpen(job.id)} aria-label={`Open ${kind.noun} ${job.id}`}>
                  <Code variant="ghost">{job.id.slice(0, 8)}</Code>
                </Button>
              </Table.RowHeaderCell>
              <Table.Cell>
                <JobBadge kind={kind} status={job.status} />
              </Table.Cell>
              {columns.map((column) => (
                <Table.Cell key={column.header} className={wide(column)}>
                  {column.cell(job)}
                </Table.Cell>
              ))}
              <Table.Cell className="wide-only">{new Date(job.created_at).toLocaleString()}</Table.Cell>
            </Table.Row>
          ))}
        </Table.Body>
      </Table.Root>
      {list.has_more && list.next_cursor && (
        <Box>
          <Button variant="soft" onClick={() => void jobs.load(list.next_cursor!)}>
            Older {kind.plural}
          </Button>
        </Box>
      )}
    </>
  );
}

/** A job's progress in words, and the same as a bar labelled by them. */
export function JobProgress({ kind, value, children }: { kind: { noun: string }; value: number; children: ReactNode }) {
  const label = `${kind.noun}-progress-label`;
  return (
    <>
      <Text as="p" size="2" id={label}>
        {children}
      </Text>
      <Progress value={value} aria-labelledby={label} />
    </>
  );
}

/** A job's metadata as a small `key: value` list; nothing when it has none. */
export function JobMetadata({ kind, metadata }: { kind: { noun: string }; metadata: Record<string, string> | null }) {
  const pairs = Object.entries(metadata ?? {});
  if (pairs.length === 0) return null;
  return (
    <dl className="job-metadata" data-testid={`${kind.noun}-metadata`}>
      {pairs.map(([key, value]) => (
        <div key={key}>
          <Text size="2" color="gray" asChild>
            <dt>{key}:</dt>
          </Text>{" "}
          <Text size="2" asChild>
            <dd>{value}</dd>
          </Text>
        </div>
      ))}
    </dl>
  );
}

/**
 * An open job: read now and every few seconds until it ends (then `onChange`, as after a cancel), with
 * its status, its metadata, its error and, while it may be, its cancellation. `body` is what its kind shows of it
 * (progress, model), `footer` what it shows once there is more (results, evaluation).
 */
export function JobDetail<J extends Job>(props: { kind: JobKind<J>; id: string; onChange(): void; body(job: J): ReactNode; footer(job: J): ReactNode }) {
  const { kind, id, onChange } = props;
  const credential = kind.credential(useConsole());
  const [job, setJob] = useState<J | null>(null);
  const [error, setError] = useState<string | null>(null);

  const read = useCallback(async () => {
    try {
      const next = kind.schema.parse((await call(`${kind.path}/${id}`, credential)).plain);
      setJob(next);
      return next;
    } catch (err) {
      setError(describe(err));
      return null;
    }
  }, [kind, id, credential]);

  usePolledJob(read, kind.ended, onChange);

  async function cancel() {
    try {
      setJob(kind.schema.parse((await call(`${kind.path}/${id}/cancel`, credential, { method: "POST" })).plain));
      onChange();
    } catch (err) {
      setError(describe(err));
    }
  }

  if (!job) return <ErrorCallout error={error} />;
  return (
    <Card>
      <Flex direction="column" gap="2">
        <Flex gap="2" align="center" wrap="wrap">
          <Heading as="h2" size="4">
            {title(kind)} <Code variant="ghost">{job.id}</Code>
          </Heading>
          <JobBadge kind={kind} status={job.status} />
        </Flex>
        <JobMetadata kind={kind} metadata={job.metadata} />
        {props.body(job)}
        {job.error && <ErrorCallout error={`${job.error.message} (${job.error.code}${job.error.line === null ? "" : `, line ${job.error.line}`})`} />}
        <ErrorCallout error={error} />
        {kind.cancellable(job) && (
          <Box>
            <ConfirmDialog
              title={`Cancel this ${kind.noun}?`}
              description={kind.cancelWarning}
              confirm={`Cancel ${kind.noun}`}
              onConfirm={() => void cancel()}
              trigger={(openDialog) => (
                <Button color="red" variant="soft" onClick={openDialog}>
                  {`Cancel ${kind.noun}`}
                </Button>
              )}
            />
          </Box>
        )}
        {props.footer(job)}
      </Flex>
    </Card>
  );
}
