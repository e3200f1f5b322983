/**
 * `client.batches`: durable bulk jobs. A batch is created, its JSONL input is PUT to the signed
 * storage address the create answer names (never with the API key), it is submitted, a worker runs
 * it, and its results are read page by page once it has finished. `run` does all of that:
 *
 *     const { batch, results } = await client.batches.run(records, { onProgress: (b) => console.log(b.status) });
 *     for await (const record of results) console.log(record.custom_id);
 *
 * Creating again with the same idempotency key returns the same batch, so a job interrupted on the
 * caller's side resumes where it was when `run` is called again with the same `idempotencyKey`.
 * The lifecycle is the one every job has (jobs.ts); what is a batch's own is its input and results.
 */
import { BATCH_LIST_PAGE, isTerminal, type Batch, type BatchList, type BatchStatus } from "../../../../contract/batches.ts";
import { LIMITS } from "../../../../contract/limits.ts";
import type { RequestOptions, Transport, WithRequestId } from "../core.ts";
import { InputError } from "../errors.ts";
import { encodeInput, type BatchInput } from "../input.ts";
import { Jobs, type JobWaitOptions, type ListJobsParams, type Metadata, type UploadResult, type UploadTarget } from "./jobs.ts";
import type { PagePromise } from "./pages.ts";
import { ResultStream, type ResultsPage } from "./results.ts";

export interface CreateBatchParams {
  /** The size in bytes of the JSONL input that will be uploaded (1 to LIMITS.bulkFileBytes): the signed upload takes exactly that many. */
  inputBytes: number;
  /** The same key returns the same batch (1-255 characters); a random one when absent. */
  idempotencyKey?: string;
  /** Your own string pairs (at most METADATA_LIMITS.pairs; keys 1-64 characters, values up to 512), returned on the batch everywhere it is; none when absent (`metadata: null`). */
  metadata?: Metadata;
}

/**
 * `limit`: batches per page, 1 to BATCH_LIST_PAGE.max (BATCH_LIST_PAGE.default when absent); `after`:
 * the previous page's `next_cursor`; `status`: only the batches in this status.
 */
export type ListBatchesParams = ListJobsParams<BatchStatus>;

/** `onProgress` gets the batch after every poll; `signal` stops waiting (the batch keeps running: cancel it with `cancel(id)`). */
export type WaitOptions = JobWaitOptions<Batch>;

export interface RunOptions extends WaitOptions {
  /** Makes `run` resumable: the same key finds the same batch. A random one when absent. */
  idempotencyKey?: string;
  /** Your own string pairs, set on the batch at create (see CreateBatchParams). */
  metadata?: Metadata;
}

export interface BatchRun {
  /** The batch in its terminal state: completed, failed, cancelled or expired. */
  batch: Batch;
  /** Its results, in input order (empty for a batch that failed validation). */
  results: ResultStream;
}

export class Batches {
  private readonly jobs: Jobs<Batch, BatchList>;

  constructor(
    transport: Transport,
    private readonly defaultModel: () => string,
  ) {
    this.jobs = new Jobs(transport, { noun: "batch", path: "/v1/batches", auth: "api_key", isTerminal: (b) => isTerminal(b.status), listLimit: BATCH_LIST_PAGE.default });
  }

  /**
   * Creates a batch for an input of `inputBytes` bytes (or returns the one this idempotency key
   * already made), with the signed `upload` destination while no input has arrived: it takes
   * exactly that many bytes. A size no batch can have throws InputError before anything is sent;
   * the same key with another size is a ConflictError (`idempotency_conflict`).
   *
   *     const input = await readFile("tickets.jsonl");
   *     const batch = await client.batches.create({ inputBytes: input.byteLength, idempotencyKey: "tickets-2026-11-22", metadata: { team: "support" } });
   *     batch.upload?.url; // PUT the JSONL here, with exactly batch.upload.headers (or use batches.upload)
   *
   * `metadata` is sent as given; the service checks it (an UnprocessableEntityError, 422, names what is wrong).
   */
  async create(params: CreateBatchParams, options?: RequestOptions): Promise<WithRequestId<Batch>> {
    const inputBytes = params?.inputBytes;
    if (!Number.isInteger(inputBytes) || inputBytes < 1 || inputBytes > LIMITS.bulkFileBytes) {
      throw new InputError(`batches.create takes { inputBytes }: the size of the input that will be uploaded, an integer from 1 to ${LIMITS.bulkFileBytes} bytes`);
    }
    return this.jobs.create(params.idempotencyKey, inputBytes, { metadata: params.metadata }, options);
  }

  /**
   * Uploads the input of a created batch: records (written as JSONL), the path of a JSONL file, or
   * its bytes, PUT to the batch's signed `upload.url` with exactly its `upload.headers`. Input of
   * another length than the batch was created for throws InputError before anything is sent.
   *
   *     const input = await readFile("tickets.jsonl");
   *     const batch = await client.batches.create({ inputBytes: input.byteLength });
   *     await client.batches.upload(batch, input);
   *     await client.batches.submit(batch.id);
   */
  async upload(batch: UploadTarget, input: BatchInput, options?: RequestOptions): Promise<UploadResult> {
    return this.jobs.upload(batch, () => encodeInput(input, this.defaultModel()), options);
  }

  /**
   * Queues an uploaded batch for the worker; repeating it changes nothing.
   *
   *     const queued = await client.batches.submit(batch.id); // queued.status === "queued"
   */
  async submit(id: string, options?: RequestOptions): Promise<WithRequestId<Batch>> {
    return this.jobs.submit(id, options);
  }

  /**
   * The batch's status, timestamps, record counts and progress.
   *
   *     const { status, request_counts } = await client.batches.retrieve(id);
   */
  async retrieve(id: string, options?: RequestOptions): Promise<WithRequestId<Batch>> {
    return this.jobs.retrieve(id, options);
  }

  /**
   * Cancels a batch that has not finished: no new work starts, committed results stay readable.
   * A finished batch is returned unchanged.
   *
   *     await client.batches.cancel(id);
   */
  async cancel(id: string, options?: RequestOptions): Promise<WithRequestId<Batch>> {
    return this.jobs.cancel(id, options);
  }

  /**
   * The account's batches, newest first: awaited, one page (`limit` batches, from `after`); iterated,
   * every batch of every page, each page fetched when the loop reaches it.
   *
   *     for await (const batch of client.batches.list()) console.log(batch.id, batch.status);
   *     const page = await client.batches.list({ limit: 50 });   // { data, has_more, next_cursor }
   *     for await (const batch of client.batches.list({ status: "running" })) console.log(batch.id);
   */
  list(params: ListBatchesParams = {}, options?: RequestOptions): PagePromise<Batch, BatchList> {
    return this.jobs.list(params, options);
  }

  /**
   * A finished batch's results, in input order, fetched page by page as they are iterated.
   *
   *     for await (const record of client.batches.results(id)) {
   *       if ("error" in record) console.error(record.custom_id, record.error.message);
   *     }
   */
  results(id: string, params: { after?: number } = {}, options?: RequestOptions): ResultStream {
    const path = this.jobs.path(id, "results");
    return new ResultStream((after) => this.jobs.get<ResultsPage>(path, options, { after }), params.after ?? 0);
  }

  /**
   * Polls a batch until it is terminal (completed, failed, cancelled or expired) and returns it.
   *
   *     const done = await client.batches.wait(id, { onProgress: (b) => console.log(b.request_counts) });
   */
  async wait(id: string, options: WaitOptions = {}): Promise<Batch> {
    return this.jobs.wait(id, options);
  }

  /**
   * Creates a batch, uploads the input, submits it, waits until it is terminal (calling
   * `onProgress` with the batch at every poll) and returns the final batch and its results.
   *
   *     const { batch, results } = await client.batches.run("tickets.jsonl", { pollInterval: 5000, metadata: { ticket: "OPS-12" } });
   *     if (batch.status === "completed") for (const record of await results.toArray()) console.log(record);
   */
  async run(input: BatchInput, options: RunOptions = {}): Promise<BatchRun> {
    const request = { signal: options.signal };
    const submitted = await this.jobs.start(async () => ({ fields: { metadata: options.metadata }, bytes: await encodeInput(input, this.defaultModel()) }), options.idempotencyKey, request);
    const batch = await this.jobs.wait(submitted.id, options);
    return { batch, results: this.results(batch.id, {}, request) };
  }
}
