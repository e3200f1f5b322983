/**
 * The training kind of job: a job's lifecycle is the job store's (store.ts: create, find, list,
 * submit, cancel, the lease, fail, expire, purge); this file adds what only a training has, for the
 * edge (its trained model's report, retiring it) and the sidecar's training worker (start, read an
 * example, accept or reject, activate), every write of a step under the store's fence.
 *
 *   uploading --submit--> queued --claim--> validating --start--> running --(examples read)-->
 *   accepted --activate--> ready  |  rejected;   validating --fail--> failed
 *   any non-terminal --cancel--> cancelled;      past its deadline --expire--> expired
 *
 *     const store = new TrainingStore(httpDb(sql));   // or poolDb(pool) in the sidecar
 *     const claim = await store.claimWork(leaseMs, served);
 */
import { z } from "zod";
import { JobError } from "../../contract/jobs.ts";
import { LIMITS } from "../../contract/limits.ts";
import { EvaluationReport, InterimEvaluation, TrainingStatus } from "../../contract/trainings.ts";
import { Column, sql, type Db } from "../db.ts";
import { SavedTask, type TrainedHeads } from "../trained.ts";
import { JobStore, PROGRESS_WINDOW_MINUTES, type Frozen, type JobKind, type Lease } from "./store.ts";

const { time: Time, int: Int } = Column;

const COLUMNS =
  "id, account_id, status, idempotency_key, metadata, base_model, exclude_suspected_labels, base_release, object_key, input_bytes, task, total_examples, held_out_examples, examples_read, " +
  "report, interim, model_id, error, created_at, submitted_at, started_at, finished_at, expires_at, purged_at";

/** A training as the edge and the worker read it. */
export const TrainingRow = z.object({
  id: z.string(),
  account_id: z.string(),
  status: TrainingStatus,
  idempotency_key: z.string(),
  metadata: z.record(z.string(), z.string()).nullable(),
  base_model: z.string(),
  exclude_suspected_labels: z.boolean(),
  base_release: z.string().nullable(),
  object_key: z.string(),
  input_bytes: Int.nullable(),
  task: SavedTask.nullable(),
  total_examples: Int,
  held_out_examples: Int,
  examples_read: Int,
  report: EvaluationReport.nullable(),
  interim: InterimEvaluation.nullable(),
  model_id: z.string().nullable(),
  error: JobError.nullable(),
  created_at: Time,
  submitted_at: Time.nullable(),
  started_at: Time.nullable(),
  finished_at: Time.nullable(),
  expires_at: Time,
  purged_at: Time.nullable(),
});
export type TrainingRow = z.infer<typeof TrainingRow>;

/** A row with the reading rate the status shows. */
export const TrainingStatusRow = TrainingRow.extend({ recent_reads: Int });
export type TrainingStatusRow = z.infer<typeof TrainingStatusRow>;

const STATUS_COLUMNS = `${COLUMNS}, (SELECT count(*) FROM training_examples e WHERE e.training_id = trainings.id AND e.read_at > now() - interval '${PROGRESS_WINDOW_MINUTES} minutes') AS recent_reads`;

/** An example as stored at validation, and as the worker reads it back. */
export interface StoredExample {
  line: number;
  customId: string;
  /** The state's JSON text. */
  state: string;
  outcomes: number[];
  heldOut: boolean;
  /** An image example's asset (its features are read from its canonical PNG); null for text. */
  assetId: string | null;
}

const ExampleRow = z.object({
  line: Int,
  custom_id: z.string(),
  state: z.string(),
  outcomes: z.array(Int),
  held_out: z.boolean(),
  asset_id: z.string().nullable(),
  features: z.array(z.coerce.number()).nullable(),
  zero_shot: z.array(z.array(z.number())).nullable(),
  embedding: z.array(z.coerce.number()).nullable().optional(),
  encoder: z.string().nullable().optional(),
});

/**
 * An example with what its step read: its features, the state's sentence embedding with the encoder's
 * fingerprint (null where the runtime had no encoder), and the base's zero-shot distributions per
 * question (null in older jobs' training part).
 */
export interface ReadExample extends StoredExample {
  features: number[];
  embedding: { encoder: string; values: number[] } | null;
  zeroShot: number[][] | null;
}

/** A held claim on a training, with the row it was claimed in. */
export interface TrainingClaim extends Lease {
  row: TrainingRow;
  /** The deadline, ms since the epoch. */
  deadline: number;
}

/** The release an accepted candidate becomes (model_releases), owned by the training's account. */
export interface TrainedRelease {
  id: string;
  fingerprint: string;
  /** The base's runtime release: the trained release runs on it. */
  baseRelease: string;
  description: string;
  task: SavedTask;
  heads: TrainedHeads;
}

export const TRAINING_KIND: JobKind<TrainingStatusRow> = {
  table: "trainings",
  statuses: { terminal: "training_status_terminal", open: "training_status_open" },
  columns: STATUS_COLUMNS,
  parse: (row) => TrainingStatusRow.parse(row),
  objectKey: (id) => `trainings/${id}/examples.jsonl`,
  lifetimeMs: LIMITS.trainingLifetimeMs,
  quota: ({ active, kept }) => ({
    allows: sql`${active} < ${LIMITS.activeTrainings} AND ${kept} < ${LIMITS.storedTrainings}`,
    state: sql`${LIMITS.activeTrainings}::int AS max_active_trainings, ${LIMITS.storedTrainings}::int AS max_stored_trainings`,
  }),
  // An accepted training's release, never served, is retired with it when it is cancelled or expires.
  onEnd: "UPDATE model_releases r SET retired_at = now() FROM ended WHERE r.id = ended.model_id AND r.retired_at IS NULL",
  data: [{ table: "training_examples", job: "training_id" }],
  // Nothing of these is served afterwards (no model, no report): their file and examples go at the next cleanup.
  purgeAtOnce: ["cancelled", "failed", "expired"],
};

/** What a training's submit freezes: the base release its model resolved to. */
export const trainingFrozen = (baseRelease: string): Frozen => ({ base_release: sql`${baseRelease}` });

export class TrainingStore extends JobStore<TrainingStatusRow> {
  constructor(db: Db) {
    super(TRAINING_KIND, db);
  }

  // ---- The edge: an account's trained models ----

  /** The evaluation report of the account's trained model `model` (its release id); null when there is none. */
  async reportOfModel(model: string, accountId: string): Promise<TrainingRow["report"]> {
    const [row] = await this.db.query(
      `SELECT t.report FROM model_releases r JOIN trainings t ON t.id = r.training_id
        WHERE r.id = $1 AND t.account_id = $2 AND r.retired_at IS NULL AND t.status = 'ready'`,
      [model, accountId],
    );
    return row ? EvaluationReport.parse(row.report) : null;
  }

  /**
   * Retires the account's trained model `model`: new requests for it answer 404. Returns whether a
   * serving model of the account was retired (false: unknown, another account's, or already retired).
   */
  async retire(model: string, accountId: string): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE model_releases r SET retired_at = now()
         FROM trainings t
        WHERE r.id = $1 AND t.id = r.training_id AND t.account_id = $2 AND r.retired_at IS NULL
        RETURNING r.id`,
      [model, accountId],
    );
    return rows.length > 0;
  }

  // ---- The sidecar's training worker ----

  /** Leases the open training that waited longest whose base release is served here (`served`); a queued one becomes validating. */
  async claimWork(leaseMs: number, served: string[]): Promise<TrainingClaim | null> {
    const claimed = await this.claim(leaseMs, sql`j.base_release = ANY (${served}::text[])`);
    if (!claimed) return null;
    const row = TrainingRow.parse(claimed.row);
    return { ...claimed.lease, row, deadline: Date.parse(row.expires_at) };
  }

  /**
   * A validated file's examples and task stored and the training running, in one fenced statement;
   * an image training's assets are taken by it in the same statement (image_assets.training_id:
   * they then live while it runs and 30 days after).
   */
  async start(claim: Lease, task: SavedTask, examples: StoredExample[]): Promise<boolean> {
    const assets = examples.map((e) => e.assetId);
    const [row] = await this.db.query(
      sql`WITH started AS (
            UPDATE trainings SET status = 'running', task = ${JSON.stringify(task)}, total_examples = ${examples.length}, held_out_examples = ${examples.filter((e) => e.heldOut).length}
             WHERE ${this.fence(claim)} AND status = 'validating' RETURNING id, account_id),
          stored AS (
            INSERT INTO training_examples (training_id, line, custom_id, state, outcomes, held_out, asset_id)
            SELECT started.id, e.line, e.custom_id, e.state, string_to_array(e.outcomes, ',')::int[], e.held_out, e.asset_id
              FROM started,
                   unnest(${examples.map((e) => e.line)}::int[], ${examples.map((e) => e.customId)}::text[], ${examples.map((e) => e.state)}::text[],
                          ${examples.map((e) => e.outcomes.join(","))}::text[], ${examples.map((e) => e.heldOut)}::boolean[], ${assets}::uuid[])
                   AS e(line, custom_id, state, outcomes, held_out, asset_id)
            ON CONFLICT DO NOTHING),
          taken AS (
            UPDATE image_assets a SET training_id = started.id FROM started WHERE a.id = ANY (${assets}::uuid[]) AND a.account_id = started.account_id)
          SELECT count(*) AS started FROM started`,
    );
    return Int.parse(row?.started) > 0;
  }

  /**
   * The next example whose step has not run; null when every one has. Examples are read in an order
   * fixed by a hash of their custom_id, not in file order: a file sorted by label still gives
   * current held-out figures early, from every outcome.
   */
  async nextExample(trainingId: string): Promise<StoredExample | null> {
    const [row] = await this.db.query(
      `SELECT line, custom_id, state, outcomes, held_out, asset_id, NULL AS features, NULL AS zero_shot FROM training_examples
        WHERE training_id = $1 AND features IS NULL ORDER BY md5('read:' || custom_id), line LIMIT 1`,
      [trainingId],
    );
    if (!row) return null;
    const e = ExampleRow.parse(row);
    return { line: e.line, customId: e.custom_id, state: e.state, outcomes: e.outcomes, heldOut: e.held_out, assetId: e.asset_id };
  }

  /**
   * Commits one example's features (its embedding, and zero-shot answers) under the fence, once.
   * Returns the examples read since, or null when nothing was written.
   */
  async commitExample(claim: Lease, line: number, features: number[], zeroShot: number[][] | null, embedding: ReadExample["embedding"] = null): Promise<number | null> {
    const [row] = await this.db.query(
      sql`WITH read AS (
            UPDATE training_examples
               SET features = ${features}::real[], zero_shot = ${zeroShot === null ? null : JSON.stringify(zeroShot)}::jsonb,
                   embedding = ${embedding?.values ?? null}::real[], encoder = ${embedding?.encoder ?? null}, read_at = now()
             WHERE training_id = ${claim.id} AND line = ${line} AND features IS NULL
               AND EXISTS (SELECT 1 FROM trainings WHERE ${this.fence(claim)} AND status = 'running')
             RETURNING line)
          UPDATE trainings SET examples_read = examples_read + (SELECT count(*) FROM read)
           WHERE id = ${claim.id} RETURNING (SELECT count(*) FROM read) AS read, examples_read`,
    );
    return row && Int.parse(row.read) > 0 ? Int.parse(row.examples_read) : null;
  }

  /** Records the held-out figures of a candidate fitted on the examples read so far, under the fence. */
  async setInterim(claim: Lease, interim: InterimEvaluation): Promise<void> {
    await this.db.query(sql`UPDATE trainings SET interim = ${JSON.stringify(interim)} WHERE ${this.fence(claim)} AND status = 'running'`);
  }

  /** One held-out example of the training (the state a new model's first decision is asked about); null when none is left. */
  async anyExample(trainingId: string): Promise<{ state: string; assetId: string | null } | null> {
    const [row] = await this.db.query("SELECT state, asset_id FROM training_examples WHERE training_id = $1 ORDER BY held_out DESC, line LIMIT 1", [trainingId]);
    return row ? { state: z.string().parse(row.state), assetId: z.string().nullable().parse(row.asset_id) } : null;
  }

  /** Every example with what its step read, in line order (the fit runs once all have). */
  async readExamples(trainingId: string): Promise<ReadExample[]> {
    const rows = await this.db.query(
      `SELECT line, custom_id, state, outcomes, held_out, asset_id, features, zero_shot, embedding, encoder FROM training_examples
        WHERE training_id = $1 AND features IS NOT NULL ORDER BY line`,
      [trainingId],
    );
    return rows.map((raw) => {
      const e = ExampleRow.parse(raw);
      const example = { line: e.line, customId: e.custom_id, state: e.state, outcomes: e.outcomes, heldOut: e.held_out, assetId: e.asset_id };
      const embedding = e.embedding && e.encoder ? { encoder: e.encoder, values: e.embedding } : null;
      return { ...example, features: e.features!, embedding, zeroShot: e.zero_shot };
    });
  }

  /** Ends a running training as rejected with its report; false when the claim was lost. */
  async reject(claim: Lease, report: EvaluationReport): Promise<boolean> {
    const rows = await this.db.query(
      sql`UPDATE trainings SET status = 'rejected', report = ${JSON.stringify(report)}, finished_at = now(), lease_token = NULL, lease_expires_at = NULL
           WHERE ${this.fence(claim)} AND status = 'running' RETURNING id`,
    );
    return rows.length > 0;
  }

  /**
   * Registers an accepted candidate as an immutable release owned by the account, not served yet
   * (no sidecar), and marks the training accepted with its report: one fenced statement, so a
   * worker that lost its claim registers nothing and a second acceptance of the same training finds
   * the release there (its id is the training's) and writes nothing.
   */
  async accept(claim: Lease, release: TrainedRelease, report: EvaluationReport): Promise<boolean> {
    const [row] = await this.db.query(
      sql`WITH accepted AS (
            UPDATE trainings SET status = 'accepted', model_id = ${release.id}, report = ${JSON.stringify(report)}
             WHERE ${this.fence(claim)} AND status = 'running' RETURNING id, account_id),
          registered AS (
            INSERT INTO model_releases (id, fingerprint, owners, url, token_env, sidecar_url, release_date, description, base_release, task, head, training_id, modality)
            SELECT ${release.id}, ${release.fingerprint}, ARRAY[accepted.account_id], b.url, b.token_env, NULL, current_date, ${release.description}, b.id,
                   ${JSON.stringify(release.task)}::jsonb, ${JSON.stringify(release.heads)}::jsonb, accepted.id, b.modality
              FROM accepted, model_releases b WHERE b.id = ${release.baseRelease}
            RETURNING id)
          SELECT (SELECT count(*) FROM accepted) AS accepted, (SELECT count(*) FROM registered) AS registered`,
    );
    return Int.parse(row?.accepted ?? 0) > 0 && Int.parse(row?.registered ?? 0) > 0;
  }

  /**
   * Makes an accepted training's release served by the sidecar at `selfUrl` (the one that verified
   * its identity) and the training ready, in one fenced statement.
   */
  async activate(claim: Lease, selfUrl: string): Promise<boolean> {
    const [row] = await this.db.query(
      sql`WITH ready AS (
            UPDATE trainings SET status = 'ready', finished_at = now(), lease_token = NULL, lease_expires_at = NULL
             WHERE ${this.fence(claim)} AND status = 'accepted' RETURNING model_id),
          served AS (
            UPDATE model_releases r SET sidecar_url = ${selfUrl} FROM ready WHERE r.id = ready.model_id AND r.retired_at IS NULL RETURNING r.id)
          SELECT (SELECT count(*) FROM ready) AS ready`,
    );
    return Int.parse(row?.ready ?? 0) > 0;
  }
}
