/**
 * The lifecycle every kind of job shares, written once: a job is created under an idempotency key
 * (the same key finds the same job), its input is PUT to the signed storage address the create
 * answer names (never with a credential of the client), it is submitted, retrieved, cancelled,
 * listed page by page, and polled until its status is terminal. A create declares the input's size,
 * and its signed upload takes exactly that many bytes. `client.batches` and `client.trainings` each
 * hold a `Jobs` of their kind and keep only what differs: what create sends, how the input is
 * encoded, and their extras (a batch's results, a training's report).
 *
 *     const jobs = new Jobs<Batch, BatchList>(transport, { noun: "batch", path: "/v1/batches", auth: "api_key", isTerminal: (b) => isTerminal(b.status), listLimit: 20 });
 *     const submitted = await jobs.start(async () => ({ fields: {}, bytes }), "tickets-2026-11-22");
 *     const done = await jobs.wait(submitted.id, { onProgress: (b) => console.log(b.status) });
 */
import type { Upload } from "../../../../contract/batches.ts";
import { sleep, type Call, type Credential, type RequestOptions, type Transport, type WithRequestId, withRequestId } from "../core.ts";
import { APIUserAbortError, InputError } from "../errors.ts";
import { PagePromise, type CursorPage } from "./pages.ts";

/** Milliseconds between the polls of `wait` (and of `batches.run`) when the caller names none. */
export const DEFAULT_POLL_INTERVAL_MS = 2000;

/** What one kind of job differs in, as far as the shared lifecycle is concerned. */
export interface JobKind<Job> {
  /** How messages name one job of the kind: "batch", "training". */
  noun: string;
  /** The collection's path, e.g. `/v1/batches`; one job is `${path}/${id}`. */
  path: string;
  /** The credential every route of the kind takes. */
  auth: Credential;
  /** Whether the job is in a status it never leaves. */
  isTerminal: (job: Job) => boolean;
  /** Jobs per list page when the caller names no `limit`. */
  listLimit: number;
}

/** What the lifecycle reads of a job: its id, and the signed upload address while its input has not arrived. */
export interface JobShape {
  id: string;
  upload?: Upload | undefined;
}

/** What an upload reads of a job: its signed destination, and the input size it was created for when known. */
export interface UploadTarget {
  upload?: Upload | undefined;
  input_bytes?: number | null | undefined;
}

export interface ListJobsParams<Status extends string = string> {
  /** Jobs per page, 1 to the kind's `max` (BATCH_LIST_PAGE, TRAINING_LIST_PAGE); its `default` when absent. */
  limit?: number;
  /** The `next_cursor` of the previous page. */
  after?: string;
  /** Only the jobs in this status (one of the kind's statuses; the service refuses another with 422); every status when absent. */
  status?: Status;
}

/** A job's metadata: the caller's own string pairs, at most METADATA_LIMITS.pairs of them (keys 1-64 characters, values up to 512). */
export type Metadata = Record<string, string>;

export interface JobWaitOptions<Job> {
  /** Called with the job after every poll, the final one included. */
  onProgress?: (job: Job) => void;
  /** Milliseconds between polls (default 2000). */
  pollInterval?: number;
  /** Stops waiting (the job itself keeps running: cancel it with `cancel(id)`). */
  signal?: AbortSignal;
}

/** What storage answers to an accepted upload. */
export interface UploadResult {
  key: string;
  size: number;
  etag: string;
}

/** A job's input, encoded, and the fields its create sends beside the idempotency key and the input's size (an absent one is not sent). */
export interface JobInput {
  fields: Record<string, unknown>;
  bytes: Uint8Array;
}

export class Jobs<Job extends JobShape, List extends CursorPage<Job>> {
  constructor(
    private readonly transport: Transport,
    private readonly kind: JobKind<Job>,
  ) {}

  /** `${kind.path}/${id}`, then `/${action}` when one is named; InputError for an id that is not a non-empty string. */
  path(id: string, action?: string): string {
    if (typeof id !== "string" || id === "") throw new InputError(`a ${this.kind.noun} id is a non-empty string`);
    const path = `${this.kind.path}/${encodeURIComponent(id)}`;
    return action === undefined ? path : `${path}/${action}`;
  }

  /** A GET under the kind's path with its credential: a job, a page of jobs, or a kind's extra (report, results). */
  async get<T>(path: string, options?: RequestOptions, query?: Call["query"]): Promise<WithRequestId<T>> {
    return withRequestId(await this.transport.request<T>({ method: "GET", path, auth: this.kind.auth, query }, options));
  }

  /**
   * Creates a job whose input will be `inputBytes` long, sending `fields` beside the idempotency key
   * (a random one when absent) and the size, or returns the one the key made.
   */
  async create(idempotencyKey: string | undefined, inputBytes: number, fields: Record<string, unknown>, options?: RequestOptions): Promise<WithRequestId<Job>> {
    const body = JSON.stringify({ idempotency_key: idempotencyKey ?? `sdk-${crypto.randomUUID()}`, input_bytes: inputBytes, ...fields });
    return this.post(this.kind.path, body, options);
  }

  /**
   * PUTs a created job's input to its signed `upload.url` with exactly its `upload.headers`; `encode`
   * runs only once the job is known to take input, so a job that has it already is said first. Input
   * of another length than the job was created for is refused before it is sent: storage would.
   */
  async upload(job: UploadTarget, encode: () => Promise<Uint8Array>, options?: RequestOptions): Promise<UploadResult> {
    if (!job.upload) {
      throw new InputError(`this ${this.kind.noun} has no upload destination: its input has already arrived (submit it), or create it again with the same idempotency key`);
    }
    const body = await encode();
    if (typeof job.input_bytes === "number" && body.byteLength !== job.input_bytes) {
      throw new InputError(
        `the input is ${body.byteLength} bytes, but this ${this.kind.noun} was created for ${job.input_bytes} bytes (its signed upload takes exactly that many): upload the input it was created for, or create a new ${this.kind.noun} for this one`,
      );
    }
    const reply = await this.transport.request<UploadResult>({ method: "PUT", url: job.upload.url, headers: job.upload.headers, body }, options);
    return reply.data;
  }

  async submit(id: string, options?: RequestOptions): Promise<WithRequestId<Job>> {
    return this.post(this.path(id, "submit"), "{}", options);
  }

  async retrieve(id: string, options?: RequestOptions): Promise<WithRequestId<Job>> {
    return this.get<Job>(this.path(id), options);
  }

  async cancel(id: string, options?: RequestOptions): Promise<WithRequestId<Job>> {
    return this.post(this.path(id, "cancel"), "{}", options);
  }

  /** Awaited, one page; iterated, every job of every page (PagePromise). */
  list(params: ListJobsParams = {}, options?: RequestOptions): PagePromise<Job, List> {
    const limit = params.limit ?? this.kind.listLimit;
    const status = params.status;
    return new PagePromise((after) => this.get<List>(this.kind.path, options, { limit, after, status }), params.after);
  }

  /** Polls the job until it is terminal and returns it; an abort names the job, which goes on. */
  async wait(id: string, options: JobWaitOptions<Job> = {}): Promise<Job> {
    this.transport.require(this.kind.auth);
    const interval = options.pollInterval ?? DEFAULT_POLL_INTERVAL_MS;
    try {
      for (;;) {
        const job = await this.retrieve(id, { signal: options.signal });
        options.onProgress?.(job);
        if (this.kind.isTerminal(job)) return job;
        await sleep(interval, options.signal);
      }
    } catch (err) {
      // Aborted while polling or between polls: the same answer, naming the job that goes on.
      if (!(err instanceof APIUserAbortError)) throw err;
      throw new APIUserAbortError(`stopped waiting for ${this.kind.noun} ${id}; it keeps running until it finishes or is cancelled`, { cause: err });
    }
  }

  /**
   * Creates a job (or finds the one `idempotencyKey` made), uploads its input unless that has
   * already arrived, and submits it; returns the submitted job. The credential is checked and the
   * input encoded first, so input that cannot be sent is refused before a job exists.
   */
  async start(encode: () => Promise<JobInput>, idempotencyKey: string | undefined, options?: RequestOptions): Promise<WithRequestId<Job>> {
    this.transport.require(this.kind.auth);
    const { fields, bytes } = await encode();
    const created = await this.create(idempotencyKey, bytes.byteLength, fields, options);
    // No upload destination: this key's job already has its input (a resumed create or run).
    if (created.upload) await this.upload(created, async () => bytes, options);
    return this.submit(created.id, options);
  }

  private async post(path: string, body: string, options?: RequestOptions): Promise<WithRequestId<Job>> {
    return withRequestId(await this.transport.request<Job>({ method: "POST", path, auth: this.kind.auth, body }, options));
  }
}
