/**
 * What every kind of job (a batch, a training) shares on the wire. A job's lifecycle is the same for
 * each kind (server-shared/jobs/store.ts); its resource shapes are the kind's own (batches.ts,
 * trainings.ts).
 */
import { z } from "zod";

/** Why a job failed as a whole (its input file refused, or gone): a stable code, a message, and the input line at fault (null: the file as a whole). */
export const JobError = z.object({ code: z.string(), message: z.string(), line: z.number().int().nullable() });
export type JobError = z.infer<typeof JobError>;
