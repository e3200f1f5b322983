/**
 * The routes every kind of job has, written once (runs in workerd); a kind's route file names its
 * hooks and adds its own routes (a batch's results, a training's report). Every statement is the job
 * store's (server-shared/jobs/store.ts).
 *
 *   POST {path} {idempotency_key, input_bytes?, ...}
 *                                        -> 201 job + upload (of exactly input_bytes when declared; else through the edge's
 *                                           /storage, bounded by the kind's file limit); 200 with the same job on a repeat;
 *                                           409 when the repeat names another size; 429 when a quota is full
 *   POST {path}/{id}/submit {}           -> job (queued); 409 until the input has been uploaded. The sidecars' idle job
 *                                           workers are woken after the answer (edge/wake.ts)
 *   GET  {path}/{id}                     -> job
 *   POST {path}/{id}/cancel {}           -> job (cancelled, or unchanged when already terminal)
 *   GET  {path}?limit=&after=&status=    -> list, newest first (only the jobs in `status` when given)
 *
 * A job belongs to the account: another account's job answers the same 404 as an unknown id.
 *
 *     const routes = new Hono<AppEnv>();
 *     const find = jobRoutes(routes, { path: "/v1/batches", noun: "batch", ... });
 *     routes.get("/v1/batches/:id/results", async (c) => { const { row } = await find(c); ... });
 */
import type { Context, Hono, MiddlewareHandler } from "hono";
import type { z } from "zod";
import type { ErrorCode } from "../contract/errors.ts";
import { LIMITS } from "../contract/limits.ts";
import { EmptyRequest, type Parameter } from "../contract/routes.ts";
import { readJson } from "../server-shared/body.ts";
import { httpDb, type Db, type Row } from "../server-shared/db.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { signUpload } from "../server-shared/grants.ts";
import { PROGRESS_WINDOW_MINUTES, type Columns, type Frozen, type JobStore } from "../server-shared/jobs/store.ts";
import type { AppEnv } from "./env.ts";
import { pathParam, queryParam } from "./params.ts";
import { services } from "./services.ts";
import { storageGrants } from "./storage.ts";
import { wakeJobWorkers } from "./wake.ts";

/** What every kind's row has that these routes read. */
interface JobRow {
  id: string;
  status: string;
  object_key: string;
  input_bytes: number | null;
  submitted_at: string | null;
  expires_at: string;
}

export interface JobRoutesKind<T extends JobRow, S extends JobStore<T>, C> {
  /** The collection's path, e.g. "/v1/batches". */
  path: string;
  /** The job's name in messages. */
  noun: "batch" | "training";
  /** What every route runs first: authentication, and the per-second quotas where they apply. */
  auth: MiddlewareHandler<AppEnv>[];
  store: (db: Db) => S;
  /** The caller's account; with `create`, made on first use. Null: none yet (nothing to find). */
  account: (c: Context<AppEnv>, opts: { create: boolean }) => Promise<string | null>;
  /** The create request's body, and the kind's own columns it sets. */
  create: {
    request: z.ZodType<C & { idempotency_key: string; input_bytes?: number | undefined; metadata?: Record<string, string> | undefined }>;
    columns: (c: Context<AppEnv>, request: C) => Columns;
  };
  /** The 429 of a create refused by the kind's quota (the quota's state as the store read it). */
  refusal: (c: Context<AppEnv>, quota: Row) => Response;
  /** What a submit freezes (checked against the account now); throws a ServiceError to refuse it. */
  frozen: (c: Context<AppEnv>, row: T, accountId: string) => Promise<Frozen>;
  /** The job on the wire. */
  wire: (row: T) => object;
  /** The path parameter and the list's query parameters, from the contract. */
  parameters: {
    id: Parameter<z.ZodType<string>>;
    limit: Parameter<z.ZodType<number>>;
    after: Parameter<z.ZodType<string | undefined>>;
    status: Parameter<z.ZodType<string | undefined>>;
  };
  /** The 409 of a submit that cannot happen. */
  notSubmittable: ErrorCode;
}

/** Serves a kind's job routes on `app`; returns the finder its own routes use (the same 404 for an unknown id and another account's job). */
export function jobRoutes<T extends JobRow, S extends JobStore<T>, C>(app: Hono<AppEnv>, kind: JobRoutesKind<T, S, C>) {
  const { path, noun } = kind;
  app.use(path, ...kind.auth);
  app.use(`${path}/*`, ...kind.auth);
  const storeOf = (c: Context<AppEnv>): S => kind.store(httpDb(services(c.env).sql));

  async function find(c: Context<AppEnv>): Promise<{ row: T; accountId: string }> {
    const id = pathParam(c, kind.parameters.id);
    const accountId = await kind.account(c, { create: false });
    const row = id === null || accountId === null ? null : await storeOf(c).find(id, accountId);
    if (!row) throw new ServiceError("not_found", `no ${noun} with this id in this account`);
    return { row, accountId: accountId! };
  }

  app.post(path, async (c) => {
    const request = await readJson(c, kind.create.request, { maxBytes: LIMITS.controlBodyBytes });
    const accountId = (await kind.account(c, { create: true }))!;
    const declared = request.input_bytes ?? null;
    const columns = { input_bytes: declared, metadata: request.metadata ? JSON.stringify(request.metadata) : null, ...kind.create.columns(c, request) };
    const outcome = await storeOf(c).create({ id: crypto.randomUUID(), accountId, idempotencyKey: request.idempotency_key, columns });
    if ("quota" in outcome) return kind.refusal(c, outcome.quota);
    const { job, created } = outcome;
    // A declared size is part of what the key names: another size is another job. A repeat that
    // names no size takes the job's; a job made without one takes the repeat's for its grant.
    if (job.input_bytes !== null && declared !== null && job.input_bytes !== declared) {
      throw new ServiceError("idempotency_conflict", `this idempotency_key made a ${noun} for an input of ${job.input_bytes} bytes, not ${declared}; use a new key for another file`);
    }
    const bytes = job.status === "uploading" ? (job.input_bytes ?? declared) : null;
    // A fresh destination while no input has arrived; none once it has (submit may follow directly).
    const needsUpload = job.status === "uploading" && (created || (await c.env.BUCKET.head(job.object_key)) === null);
    const grants = storageGrants(c, "clients", { edgeOnly: bytes === null });
    const upload = needsUpload ? { upload: await signUpload(grants, job.object_key, bytes) } : {};
    return c.json({ ...kind.wire(job), ...upload }, created ? 201 : 200);
  });

  app.get(path, async (c) => {
    const limit = queryParam(c, kind.parameters.limit);
    const after = queryParam(c, kind.parameters.after);
    const status = queryParam(c, kind.parameters.status);
    const accountId = await kind.account(c, { create: false });
    const { rows, hasMore } = accountId ? await storeOf(c).list(accountId, { after, limit, status }) : { rows: [], hasMore: false };
    return c.json({ object: "list", data: rows.map(kind.wire), has_more: hasMore, next_cursor: hasMore ? rows.at(-1)!.id : null });
  });

  app.get(`${path}/:id`, async (c) => c.json(kind.wire((await find(c)).row)));

  app.post(`${path}/:id/submit`, async (c) => {
    await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
    const { row, accountId } = await find(c);
    if (row.status !== "uploading") {
      // A repeated submit changes nothing; a job that ended before it was submitted cannot start.
      if (row.submitted_at !== null) return c.json(kind.wire(row));
      throw new ServiceError(kind.notSubmittable, `this ${noun} is ${row.status} and was never submitted; create a new one`);
    }
    if (Date.parse(row.expires_at) <= Date.now()) {
      throw new ServiceError(kind.notSubmittable, `this ${noun} passed its deadline before it was submitted; create a new one`);
    }
    const input = await c.env.BUCKET.head(row.object_key);
    if (!input) throw new ServiceError("upload_incomplete", `the ${noun}'s input file has not been uploaded yet: PUT it to the ${noun}'s upload URL first`);
    // The grant bound the upload to the declared size; a store that did not check it is caught here.
    if (row.input_bytes !== null && input.size !== row.input_bytes) {
      throw new ServiceError("upload_mismatch", `the uploaded file is ${input.size} bytes, not the ${row.input_bytes} declared when the ${noun} was created; create a new ${noun}`);
    }
    const submitted = await storeOf(c).submit(row.id, accountId, input.size, await kind.frozen(c, row, accountId));
    if (submitted) wakeJobWorkers(c);
    // Nothing updated: a concurrent submit or cancel went first; answer with what it left.
    return c.json(kind.wire(submitted ?? (await find(c)).row));
  });

  app.post(`${path}/:id/cancel`, async (c) => {
    await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
    const { row, accountId } = await find(c);
    const cancelled = await storeOf(c).cancel(row.id, accountId);
    return c.json(kind.wire(cancelled ?? (await find(c)).row));
  });

  return { find, storeOf };
}

/**
 * A running job's rate per minute over the last PROGRESS_WINDOW_MINUTES (since its start when that is
 * more recent), from `recent` units done in that window, and when `remaining` units would be done at
 * that rate (null at no rate).
 */
export function jobRate(row: { started_at: string | null; created_at: string }, recent: number, remaining: number): { perMinute: number; doneAt: string | null } {
  const now = Date.now();
  const since = Math.max(now - PROGRESS_WINDOW_MINUTES * 60_000, Date.parse(row.started_at ?? row.created_at));
  const perMinute = recent / Math.max((now - since) / 60_000, 1 / 60);
  return { perMinute: Math.round(perMinute * 10) / 10, doneAt: perMinute > 0 ? new Date(now + (remaining / perMinute) * 60_000).toISOString() : null };
}
