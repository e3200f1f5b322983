/**
 * What every kind of job (a batch, a training) shares on the wire. A job's lifecycle is the same for
 * each kind (server-shared/jobs/store.ts); its resource shapes are the kind's own (batches.ts,
 * trainings.ts).
 *
 * A create names the job's idempotency key and its input file's size: the signed upload it answers
 * with is bound to that many bytes (the storage refuses any other length, as R2 does a signed
 * Content-Length), so no input larger than the kind's limit is ever stored.
 */
import { z } from "zod";
import { toRecord } from "./json.ts";

/** Idempotency keys: 1-255 characters, no U+0000 (bulk refuses it everywhere). */
export const IDEMPOTENCY_KEY_MAX = 255;

export const noNul = (value: string) => !value.includes("\u0000");

/** A create's `idempotency_key`: the same key finds the job it made. */
export const IdempotencyKey = z
  .string({ error: (issue) => (issue.input === undefined ? "idempotency_key is required" : "idempotency_key must be a string") })
  .min(1, "idempotency_key must not be empty")
  .max(IDEMPOTENCY_KEY_MAX, `idempotency_key must be at most ${IDEMPOTENCY_KEY_MAX} characters`)
  .refine(noNul, "idempotency_key must not contain U+0000");

/** A create's `input_bytes`: the size of the file that will be uploaded, 1 to the kind's `maxBytes`. */
export const inputBytes = (maxBytes: number, file: string) =>
  z
    .number({ error: (issue) => (issue.input === undefined ? `input_bytes is required: the ${file}'s size in bytes (its upload is bound to it)` : "input_bytes must be a number") })
    .int("input_bytes must be an integer")
    .min(1, `input_bytes must be at least 1 (the ${file} cannot be empty)`)
    .max(maxBytes, `input_bytes must be at most ${maxBytes}: a ${file} holds at most ${maxBytes / (1024 * 1024)} MiB`);

/** A job's metadata: at most this many pairs, of keys and values at most this long. */
export const METADATA_LIMITS = { pairs: 16, keyChars: 64, valueChars: 512 } as const;

/**
 * A create's `metadata`: the caller's own string pairs (a ticket, a team), returned everywhere the
 * job is; the service reads nothing in them. Stored as given, returned with its keys in Postgres'
 * jsonb order (a map: its order carries no meaning).
 */
export const JobMetadata = z.preprocess(
  toRecord,
  z
    .record(
      z
        .string()
        .min(1, "a metadata key must not be empty")
        .max(METADATA_LIMITS.keyChars, `a metadata key is at most ${METADATA_LIMITS.keyChars} characters`)
        .refine(noNul, "a metadata key must not contain U+0000"),
      z
        .string({ error: "a metadata value must be a string" })
        .max(METADATA_LIMITS.valueChars, `a metadata value is at most ${METADATA_LIMITS.valueChars} characters`)
        .refine(noNul, "a metadata value must not contain U+0000"),
      { error: "metadata must be an object of string values" },
    )
    .refine((pairs) => Object.keys(pairs).length <= METADATA_LIMITS.pairs, `metadata holds at most ${METADATA_LIMITS.pairs} pairs`)
    // The document states the bound too (JSON Schema's maxProperties), which the refinement alone would not.
    .meta({ maxProperties: METADATA_LIMITS.pairs }),
);

/** Why a job failed as a whole (its input file refused, or gone): a stable code, a message, and the input line at fault (null: the file as a whole). */
export const JobError = z.object({ code: z.string(), message: z.string(), line: z.number().int().nullable() });
export type JobError = z.infer<typeof JobError>;
