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
 */
import { BATCH_LIST_PAGE, isTerminal, type Batch, type BatchList, type Upload } from "../../../../contract/batches.ts";
import { sleep, type RequestOptions, type Transport, type WithRequestId, withRequestId } from "../core.ts";
import { APIUserAbortError, InputError } from "../errors.ts";
import { encodeInput, type BatchInput } from "../input.ts";
import { PagePromise } from "./pages.ts";
import { ResultStream, type ResultsPage } from "./results.ts";

export interface CreateBatchParams {
  /** The same key returns the same batch (1-255 characters); a random one when absent. */
  idempotencyKey?: string;
}

export interface ListBatchesParams {
  /** Batches per page, 1 to BATCH_LIST_PAGE.max (BATCH_LIST_PAGE.default when absent). */
  limit?: number;
  /** The `next_cursor` of the previous page. */
  after?: string;
}

/** What storage answers to an accepted upload. */
export interface UploadResult {
  key: string;
  size: number;
  etag: string;
}

export interface WaitOptions {
  /** Called with the batch after every poll, the final one included. */
  onProgress?: (batch: Batch) => void;
  /** Milliseconds between polls (default 2000). */
  pollInterval?: number;
  /** Stops waiting (the batch itself keeps running: cancel it with `cancel(id)`). */
  signal?: AbortSignal;
}

export interface RunOptions extends WaitOptions {
  /** Makes `run` resumable: the same key finds the same batch. A random one when absent. */
  idempotencyKey?: string;
}

export interface BatchRun {
  /** The batch in its terminal state: completed, failed, cancelled or expired. */
  batch: Batch;
  /** Its results, in input order (empty for a batch that failed validation). */
  results: ResultStream;
}

export const DEFAULT_POLL_INTERVAL_MS = 2000;

export class Batches {
  constructor(
    private readonly transport: Transport,
    private readonly defaultModel: () => string,
  ) {}

  /**
   * Creates a batch (or returns the one this idempotency key already made), with the signed
   * `upload` destination while no input has arrived.
   *
   *     const batch = await client.batches.create({ idempotencyKey: "tickets-2026-11-22" });
   *     batch.upload?.url; // PUT the JSONL here, with batch.upload.headers (or use batches.upload)
   */
  async create(params: CreateBatchParams = {}, options?: RequestOptions): Promise<WithRequestId<Batch>> {
    const body = JSON.stringify({ idempotency_key: params.idempotencyKey ?? `sdk-${crypto.randomUUID()}` });
    return withRequestId(await this.transport.request<Batch>({ method: "POST", path: "/v1/batches", body }, options));
  }

  /**
   * Uploads the input of a created batch: records (written as JSONL), the path of a JSONL file, or
   * its bytes, PUT to the batch's signed `upload.url` with exactly its `upload.headers`.
   *
   *     const batch = await client.batches.create();
   *     await client.batches.upload(batch, [{ custom_id: "t-1", body: { state: "charged twice", questions: { refund: noul("Refund?") } } }]);
   *     await client.batches.submit(batch.id);
   */
  async upload(batch: { upload?: Upload | undefined }, input: BatchInput, options?: RequestOptions): Promise<UploadResult> {
    if (!batch.upload) {
      throw new InputError("this batch has no upload destination: its input has already arrived (submit it), or create it again with the same idempotency key");
    }
    const body = await encodeInput(input, this.defaultModel());
    const reply = await this.transport.request<UploadResult>({ method: "PUT", url: batch.upload.url, headers: batch.upload.headers, body }, options);
    return reply.data;
  }

  /**
   * Queues an uploaded batch for the worker; repeating it changes nothing.
   *
   *     const queued = await client.batches.submit(batch.id); // queued.status === "queued"
   */
  async submit(id: string, options?: RequestOptions): Promise<WithRequestId<Batch>> {
    return withRequestId(await this.transport.request<Batch>({ method: "POST", path: `${batchPath(id)}/submit`, body: "{}" }, options));
  }

  /**
   * The batch's status, timestamps, record counts and progress.
   *
   *     const { status, request_counts } = await client.batches.retrieve(id);
   */
  async retrieve(id: string, options?: RequestOptions): Promise<WithRequestId<Batch>> {
    return withRequestId(await this.transport.request<Batch>({ method: "GET", path: batchPath(id) }, options));
  }

  /**
   * Cancels a batch that has not finished: no new work starts, committed results stay readable.
   * A finished batch is returned unchanged.
   *
   *     await client.batches.cancel(id);
   */
  async cancel(id: string, options?: RequestOptions): Promise<WithRequestId<Batch>> {
    return withRequestId(await this.transport.request<Batch>({ method: "POST", path: `${batchPath(id)}/cancel`, body: "{}" }, options));
  }

  /**
   * The account's batches, newest first: awaited, one page (`limit` batches, from `after`); iterated,
   * every batch of every page, each page fetched when the loop reaches it.
   *
   *     for await (const batch of client.batches.list()) console.log(batch.id, batch.status);
   *     const page = await client.batches.list({ limit: 50 });   // { data, has_more, next_cursor }
   */
  list(params: ListBatchesParams = {}, options?: RequestOptions): PagePromise<Batch, BatchList> {
    const limit = params.limit ?? BATCH_LIST_PAGE.default;
    return new PagePromise(async (after) => withRequestId(await this.transport.request<BatchList>({ method: "GET", path: "/v1/batches", query: { limit, after } }, options)), params.after);
  }

  /**
   * A finished batch's results, in input order, fetched page by page as they are iterated.
   *
   *     for await (const record of client.batches.results(id)) {
   *       if ("error" in record) console.error(record.custom_id, record.error.message);
   *     }
   */
  results(id: string, params: { after?: number } = {}, options?: RequestOptions): ResultStream {
    const path = `${batchPath(id)}/results`;
    return new ResultStream(async (after) => (await this.transport.request<ResultsPage>({ method: "GET", path, query: { after } }, options)).data, params.after ?? 0);
  }

  /**
   * Polls a batch until it is terminal (completed, failed, cancelled or expired) and returns it.
   *
   *     const done = await client.batches.wait(id, { onProgress: (b) => console.log(b.request_counts) });
   */
  async wait(id: string, options: WaitOptions = {}): Promise<Batch> {
    const interval = options.pollInterval ?? DEFAULT_POLL_INTERVAL_MS;
    try {
      for (;;) {
        const batch = await this.retrieve(id, { signal: options.signal });
        options.onProgress?.(batch);
        if (isTerminal(batch.status)) return batch;
        await sleep(interval, options.signal);
      }
    } catch (err) {
      // Aborted while polling or between polls: the same answer, naming the batch that goes on.
      if (!(err instanceof APIUserAbortError)) throw err;
      throw new APIUserAbortError(`stopped waiting for batch ${id}; it keeps running until it finishes or is cancelled`, { cause: err });
    }
  }

  /**
   * Creates a batch, uploads the input, submits it, waits until it is terminal (calling
   * `onProgress` with the batch at every poll) and returns the final batch and its results.
   *
   *     const { batch, results } = await client.batches.run("tickets.jsonl", { pollInterval: 5000 });
   *     if (batch.status === "completed") for (const record of await results.toArray()) console.log(record);
   */
  async run(input: BatchInput, options: RunOptions = {}): Promise<BatchRun> {
    const request = { signal: options.signal };
    // Encoded first, so input that cannot be sent is refused before a batch exists.
    const bytes = await encodeInput(input, this.defaultModel());
    const created = await this.create({ idempotencyKey: options.idempotencyKey }, request);
    // No upload destination: this key's batch already has its input (a resumed run).
    if (created.upload) await this.upload(created, bytes, request);
    await this.submit(created.id, request);
    const batch = await this.wait(created.id, options);
    return { batch, results: this.results(batch.id, {}, request) };
  }
}

function batchPath(id: string): string {
  if (typeof id !== "string" || id === "") throw new InputError("a batch id is a non-empty string");
  return `/v1/batches/${encodeURIComponent(id)}`;
}
