/**
 * `client.trainings`: a model of the account's own, trained from labelled examples of one decision
 * (the training file, contract/training-file.ts). Every call here takes the signed-in user's access
 * token (the client's `accessToken`), never the API key; the trained model then answers decisions
 * made with the API key, under its own id.
 *
 *     const client = new Client({ apiKey, accessToken, baseURL });
 *     const training = await client.trainings.create({ file: "triage.jsonl" });
 *     const done = await client.trainings.wait(training.id, { onProgress: (t) => console.log(t.progress?.step) });
 *     if (done.status === "ready") await client.systemOne({ model: done.model!, state, questions });
 *
 * `create` checks the file, creates the training, uploads the file to the signed storage address
 * the service names (no credential of the client goes there) and submits it. Creating again with the
 * same idempotency key returns the same training, so an interrupted `create` resumes with the key.
 * The lifecycle is the one every job has (jobs.ts); what is a training's own is its file and report.
 */
import {
  isTrainingTerminal,
  TRAINING_LIST_PAGE,
  type EvaluationReport,
  type LabelIssueList,
  type Training,
  type TrainingList,
  type TrainingStatus,
} from "../../../../contract/trainings.ts";
import type { RequestOptions, Transport, WithRequestId } from "../core.ts";
import { InputError } from "../errors.ts";
import { encodeTrainingFile, type TrainingInput } from "../training-input.ts";
import { Jobs, type JobWaitOptions, type ListJobsParams, type Metadata } from "./jobs.ts";
import { PagePromise } from "./pages.ts";

export interface CreateTrainingParams {
  /** The labelled examples: an array of them, the path of a JSONL file, or its bytes. */
  file: TrainingInput;
  /**
   * The base model the examples name (their `body.model`): checked against the file when given,
   * taken from it when absent.
   */
  model?: string;
  /** The same key returns the same training (1-255 characters); a random one when absent. */
  idempotencyKey?: string;
  /**
   * Your own string pairs (at most METADATA_LIMITS.pairs; keys 1-64 characters, values up to 512),
   * returned on the training everywhere it is; none when absent (`metadata: null`). Sent as given:
   * the service checks them (an UnprocessableEntityError, 422, names what is wrong).
   */
  metadata?: Metadata;
  /**
   * Train again without the examples whose label looks wrong (the report's label audit) and keep
   * whichever candidate the acceptance rule prefers; `report.label_audit.retrained` says which.
   */
  excludeSuspectedLabels?: boolean;
}

/**
 * `limit`: trainings per page, 1 to TRAINING_LIST_PAGE.max (TRAINING_LIST_PAGE.default when absent);
 * `after`: the previous page's `next_cursor`; `status`: only the trainings in this status.
 */
export type ListTrainingsParams = ListJobsParams<TrainingStatus>;

export interface ListLabelIssuesParams {
  /** Label issues per page, 1 to LABEL_ISSUE_PAGE.max (the service's LABEL_ISSUE_PAGE.default when absent). */
  limit?: number;
  /** The last `rank` of the previous page (0, or absent: from the first issue). */
  after?: number;
}

/** One item of a label issues page: a LabelIssue and its `rank` in the audit (1: the lowest label quality). */
export type RankedLabelIssue = LabelIssueList["data"][number];

/** `onProgress` gets the training after every poll; `signal` stops waiting (the training goes on: cancel it with `cancel(id)`). */
export type TrainingWaitOptions = JobWaitOptions<Training>;

export class Trainings {
  private readonly jobs: Jobs<Training, TrainingList>;

  constructor(
    transport: Transport,
    private readonly defaultModel: () => string,
  ) {
    this.jobs = new Jobs(transport, { noun: "training", path: "/v1/trainings", auth: "access_token", isTerminal: (t) => isTrainingTerminal(t.status), listLimit: TRAINING_LIST_PAGE.default });
  }

  /**
   * Checks the training file, creates a training for the base it names (or returns the one this
   * idempotency key already made), uploads the file while none has arrived, and submits it; returns
   * the submitted training (`queued`, or further along on a resumed create). A file the training
   * worker would refuse throws InputError naming its line, and nothing is sent.
   *
   *     const training = await client.trainings.create({ file: "triage.jsonl", idempotencyKey: "triage-v1", metadata: { team: "support" } });
   *     training.status; // "queued"
   */
  async create(params: CreateTrainingParams, options?: RequestOptions): Promise<WithRequestId<Training>> {
    return this.jobs.start(
      async () => {
        if (params === null || typeof params !== "object" || params.file === undefined) throw new InputError("trainings.create takes { file }: the labelled examples");
        const file = await encodeTrainingFile(params.file, params.model ?? this.defaultModel());
        if (params.model !== undefined && params.model !== file.base) {
          throw new InputError(`the examples name the base ${JSON.stringify(file.base)} (their body.model), not ${JSON.stringify(params.model)}: a training trains the base its examples name`);
        }
        return { fields: { model: file.base, metadata: params.metadata, exclude_suspected_labels: params.excludeSuspectedLabels }, bytes: file.bytes };
      },
      params?.idempotencyKey,
      options,
    );
  }

  /**
   * Queues a training whose file has been uploaded; repeating it changes nothing. `create` does it.
   *
   *     await client.trainings.submit(id);
   */
  async submit(id: string, options?: RequestOptions): Promise<WithRequestId<Training>> {
    return this.jobs.submit(id, options);
  }

  /**
   * The training's status, progress (`progress.examples_read` of `progress.examples_total`, and the
   * step in words), the trained model's id once accepted, and its held-out figures once evaluated.
   *
   *     const { status, progress, model } = await client.trainings.retrieve(id);
   */
  async retrieve(id: string, options?: RequestOptions): Promise<WithRequestId<Training>> {
    return this.jobs.retrieve(id, options);
  }

  /**
   * Cancels a training that has not finished; a finished one is returned unchanged.
   *
   *     await client.trainings.cancel(id);
   */
  async cancel(id: string, options?: RequestOptions): Promise<WithRequestId<Training>> {
    return this.jobs.cancel(id, options);
  }

  /**
   * The account's trainings, newest first: awaited, one page (`limit` trainings, from `after`);
   * iterated, every training of every page, each page fetched when the loop reaches it.
   *
   *     for await (const training of client.trainings.list()) console.log(training.id, training.status);
   *     const page = await client.trainings.list({ limit: 50 });   // { data, has_more, next_cursor }
   *     const ready = await client.trainings.list({ status: "ready" });
   */
  list(params: ListTrainingsParams = {}, options?: RequestOptions): PagePromise<Training, TrainingList> {
    return this.jobs.list(params, options);
  }

  /**
   * The evaluation report of an evaluated training, accepted or rejected: per question, the
   * candidate's held-out figures beside the base's zero-shot ones, and why a question did not pass;
   * and its `label_audit` (absent from reports made before it): how many examples' labels look wrong
   * (`suspected` of `examples`), the first page of them in `issues`, lowest label quality first, and
   * `has_more` when `labelIssues(id)` lists more. A ConflictError (`report_not_ready`) before the
   * candidate is evaluated.
   *
   *     const report = await client.trainings.report(id);
   *     for (const q of report.questions) console.log(q.question, q.candidate.primary, q.zero_shot.primary, q.reason);
   *     report.label_audit?.suspected;   // of report.label_audit.examples; the first ones in report.label_audit.issues
   */
  async report(id: string, options?: RequestOptions): Promise<WithRequestId<EvaluationReport>> {
    return this.jobs.get<EvaluationReport>(this.jobs.path(id, "report"), options);
  }

  /**
   * The examples whose given label looks wrong (the report's label audit), lowest label quality
   * first, each with its `rank`, `custom_id`, line, the label given and the answer the model prefers.
   * Awaited, one page (`limit` issues after the rank `after`: `{ data, has_more }`); iterated, every
   * issue of every page. A ConflictError (`report_not_ready`) before the candidate is evaluated; an
   * empty list for a report without an audit.
   *
   *     for await (const issue of client.trainings.labelIssues(id)) console.log(issue.rank, issue.custom_id, issue.given, issue.preferred);
   *     const page = await client.trainings.labelIssues(id, { limit: 50, after: 20 });   // ranks 21 to 70
   */
  labelIssues(id: string, params: ListLabelIssuesParams = {}, options?: RequestOptions): PagePromise<RankedLabelIssue, LabelIssueList> {
    const fetchPage = async (after: string | undefined) => this.jobs.get<LabelIssueList>(this.jobs.path(id, "label_issues"), options, { limit: params.limit, after });
    // The page has no next_cursor: the next one starts after its last rank.
    const nextAfter = (page: LabelIssueList) => {
      const rank = page.data.at(-1)?.rank;
      return rank === undefined ? null : String(rank);
    };
    return new PagePromise(fetchPage, params.after === undefined ? undefined : String(params.after), nextAfter);
  }

  /**
   * Polls a training until it is terminal (ready, rejected, failed, cancelled or expired) and
   * returns it. `accepted` is not terminal: the model is registered but not served yet.
   *
   *     const done = await client.trainings.wait(id, { onProgress: (t) => console.log(t.progress?.examples_read) });
   */
  async wait(id: string, options: TrainingWaitOptions = {}): Promise<Training> {
    return this.jobs.wait(id, options);
  }
}
