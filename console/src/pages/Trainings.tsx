/**
 * Training jobs (runs in the browser): the account's trainings, a new one from a labelled JSONL file
 * (created, uploaded with its progress shown, submitted), its live progress (the step, examples read
 * per minute, the estimated completion, the cross-validated figures so far), its evaluation beside
 * the base model's zero-shot answers with the reliability diagram, its intervals, confusion matrix
 * and learning curve, and its activation state: "training passed"
 * once accepted, "API ready" once the serving side answers with the model's exact identity. Where
 * the deployment takes images from a session, an image model is made here from photos too
 * (ImageTraining.tsx), followed the same way. Calls with the signed-in session (training is a
 * session route).
 */
import { Box, Code, Flex, Heading, Table, Text, TextField } from "@radix-ui/themes";
import { useEffect, useState } from "react";
import { IMAGE_BASE_ALIAS } from "../../../contract/limits.ts";
import { baselineName, EvaluationReport, Training, TrainingList, isTrainingTerminal, type TrainingStatus } from "../../../contract/trainings.ts";
import { call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { AuthorizedImage, ErrorCallout, PageLink } from "../components.tsx";
import { doneBy, JobDetail, JobFileForm, JobList, JobProgress, startJob, useJobList, type JobKind } from "../jobs.tsx";
import { NewImageModel } from "./ImageTraining.tsx";

/** A training's state in the words of the product: passing training is not being ready. */
const STATE_WORDS: Record<TrainingStatus, string> = {
  uploading: "waiting for its file",
  queued: "queued",
  validating: "checking its file",
  running: "training",
  accepted: "training passed (not yet API ready)",
  ready: "API ready",
  rejected: "rejected",
  failed: "failed",
  cancelled: "cancelled",
  expired: "expired",
};

/** What a training adds to the job lifecycle (jobs.tsx): the signed-in session, its step, its evaluation. */
const TRAININGS: JobKind<Training> = {
  path: "/v1/trainings",
  noun: "training",
  plural: "trainings",
  heading: "Training jobs",
  statusHeading: "State",
  schema: Training,
  listSchema: TrainingList,
  credential: (state) => state.session.accessToken,
  ended: (training) => isTrainingTerminal(training.status),
  cancellable: (training) => !isTrainingTerminal(training.status) && training.status !== "accepted",
  cancelWarning: "The job stops and no model is made from it.",
  words: (status) => STATE_WORDS[status],
};

export function TrainingsPage() {
  const { config, session } = useConsole();
  const jobs = useJobList(TRAININGS);
  const { load } = jobs;
  useEffect(() => void load(), [load]);

  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        Training jobs
      </Heading>
      <Text as="p">
        Teach a model one decision from your labelled examples. Every example is held out once (cross-validation) to compare it with the base model&apos;s answers, and it is served only
        when it beats them with confidence.
      </Text>
      <NewTraining onCreated={jobs.created} />
      {config.images.browser && <NewImageModel start={async (file) => jobs.created(await startJob(TRAININGS, session.accessToken, { model: IMAGE_BASE_ALIAS }, file, () => {}))} />}
      <ErrorCallout error={jobs.error} />
      {jobs.open && (
        <JobDetail
          kind={TRAININGS}
          id={jobs.open}
          onChange={jobs.reload}
          body={(training) => <TrainingProgress training={training} />}
          footer={(training) => training.evaluation && <Evaluation training={training} evaluation={training.evaluation} />}
        />
      )}
      <JobList kind={TRAININGS} jobs={jobs} columns={[{ header: "Model", cell: (training) => training.model ?? "none", wide: true }]} />
    </Flex>
  );
}

function NewTraining({ onCreated }: { onCreated(id: string): void }) {
  const { session } = useConsole();
  const [model, setModel] = useState("svc-shared");
  return (
    <JobFileForm
      inputId="training-file"
      label={<>Labelled examples, a JSONL file (one {"{"}&quot;custom_id&quot;, &quot;body&quot;, &quot;labels&quot;{"}"} per line)</>}
      button="Upload and train"
      start={async (file, progress) => onCreated(await startJob(TRAININGS, session.accessToken, { model }, file, progress))}
    >
      <Heading as="h2" size="4">
        New model from a labelled file
      </Heading>
      <Box>
        <Text as="label" htmlFor="training-model" size="2" weight="medium">
          Base model
        </Text>
        <TextField.Root id="training-model" value={model} onChange={(event) => setModel(event.target.value)} />
      </Box>
    </JobFileForm>
  );
}

/** The trained model's id once accepted (an image model's with the way to use it), and the step with the examples read while it runs. */
function TrainingProgress({ training }: { training: Training }) {
  const { config } = useConsole();
  const { progress } = training;
  return (
    <>
      {training.model && (
        <Text size="2">
          Model: <Code>{training.model}</Code>
          {training.status === "ready" && training.base_model === IMAGE_BASE_ALIAS && config.images.browser && (
            <>
              {" "}
              <PageLink to="/console/images" underline="always">
                Use it under Image decisions
              </PageLink>
            </>
          )}
        </Text>
      )}
      {progress && (
        <JobProgress kind={TRAININGS} value={(100 * progress.examples_read) / Math.max(progress.examples_total, 1)}>
          {progress.step}: {progress.examples_read} of {progress.examples_total} examples read
          {progress.examples_per_minute > 0 ? `, ${progress.examples_per_minute.toFixed(1)} a minute` : ""}
          {doneBy(progress.estimated_completion_at)}
        </JobProgress>
      )}
    </>
  );
}

/**
 * What the report adds for deciding what to do next: each question's intervals, precision and recall
 * per answer with the confusion matrix, and the learning curve (its advice, above, says whether
 * more examples would likely help).
 */
function ReportDetail({ id }: { id: string }) {
  const { session } = useConsole();
  const [report, setReport] = useState<EvaluationReport | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    call(`/v1/trainings/${id}/report`, session.accessToken)
      .then((reply) => setReport(EvaluationReport.parse(reply.plain)))
      .catch((err: unknown) => setError(describe(err)));
  }, [id, session]);
  if (!report) return <ErrorCallout error={error} />;
  const f3 = (x: number) => x.toFixed(3);
  const curve = report.learning_curve ?? [];
  return (
    <>
      {report.advice && (
        <Text as="p" size="2" weight="bold">
          {report.advice}
        </Text>
      )}
      {report.questions.map((q) => {
        const names = q.outcomes.map((o) => (o === null ? "other" : String(o)));
        return (
          <Box key={q.question}>
            {q.uncertainty && (
              <Text as="p" size="2">
                {q.question}: {q.candidate.primary_metric} {f3(q.candidate.primary)} [{f3(q.uncertainty.candidate_primary.low)}, {f3(q.uncertainty.candidate_primary.high)}] against {baselineName(report.baseline)}{" "}
                {f3(q.zero_shot.primary)}, a difference of {f3(q.uncertainty.difference.estimate)} (at least {f3(q.uncertainty.difference.low)} with{" "}
                {Math.round(q.uncertainty.confidence * 100)} % confidence); ECE {f3(q.candidate.ece)}, of which noise on {q.candidate.items} examples explains up to{" "}
                {f3(q.uncertainty.ece_noise)}.
              </Text>
            )}
            {q.confusion && q.per_outcome && (
              <>
                <Heading as="h4" size="2">
                  Answers against the truth: {q.question}
                </Heading>
                <Table.Root size="1">
                  <caption className="visually-hidden">Confusion matrix of {q.question}</caption>
                  <Table.Header>
                    <Table.Row>
                      <Table.ColumnHeaderCell>True answer</Table.ColumnHeaderCell>
                      {names.map((name) => (
                        <Table.ColumnHeaderCell key={name}>Answered {name}</Table.ColumnHeaderCell>
                      ))}
                      <Table.ColumnHeaderCell>Precision</Table.ColumnHeaderCell>
                      <Table.ColumnHeaderCell>Recall</Table.ColumnHeaderCell>
                    </Table.Row>
                  </Table.Header>
                  <Table.Body>
                    {q.confusion.map((row, t) => (
                      <Table.Row key={names[t]}>
                        <Table.RowHeaderCell>{names[t]}</Table.RowHeaderCell>
                        {row.map((n, a) => (
                          <Table.Cell key={names[a]}>{n}</Table.Cell>
                        ))}
                        <Table.Cell>{q.per_outcome![t]!.precision?.toFixed(2) ?? "-"}</Table.Cell>
                        <Table.Cell>{q.per_outcome![t]!.recall?.toFixed(2) ?? "-"}</Table.Cell>
                      </Table.Row>
                    ))}
                  </Table.Body>
                </Table.Root>
              </>
            )}
          </Box>
        );
      })}
      {curve.length > 0 && (
        <>
          <Heading as="h4" size="2">
            Learning curve: the cross-validated figure on the first examples
          </Heading>
          <Table.Root size="1">
            <caption className="visually-hidden">Learning curve</caption>
            <Table.Header>
              <Table.Row>
                <Table.ColumnHeaderCell>Examples</Table.ColumnHeaderCell>
                {curve[0]!.questions.map((q) => (
                  <Table.ColumnHeaderCell key={q.question}>{q.question}: trained ({baselineName(report.baseline)})</Table.ColumnHeaderCell>
                ))}
              </Table.Row>
            </Table.Header>
            <Table.Body>
              {curve.map((point) => (
                <Table.Row key={point.examples}>
                  <Table.RowHeaderCell>{point.examples}</Table.RowHeaderCell>
                  {point.questions.map((q) => (
                    <Table.Cell key={q.question}>
                      {f3(q.candidate)} ({f3(q.zero_shot)})
                    </Table.Cell>
                  ))}
                </Table.Row>
              ))}
            </Table.Body>
          </Table.Root>
        </>
      )}
      {report.label_audit && <LabelAuditTable audit={report.label_audit} />}
    </>
  );
}

/** The top of the label audit: the examples whose given label looks wrong, lowest label quality first. */
function LabelAuditTable({ audit }: { audit: NonNullable<EvaluationReport["label_audit"]> }) {
  const name = (o: boolean | string | number | null) => (o === null ? "other" : String(o));
  return (
    <>
      <Heading as="h4" size="2">
        Labels that look wrong: {audit.suspected} of {audit.examples} examples
      </Heading>
      {audit.issues.length === 0 ? (
        <Text as="p" size="2">
          No given label looks wrong: every example's answer, from heads trained without it, agrees with its label.
        </Text>
      ) : (
        <Table.Root size="1">
          <caption className="visually-hidden">Examples whose given label looks wrong</caption>
          <Table.Header>
            <Table.Row>
              <Table.ColumnHeaderCell>custom_id</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Line</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Question</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Given</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Model prefers</Table.ColumnHeaderCell>
            </Table.Row>
          </Table.Header>
          <Table.Body>
            {audit.issues.map((issue) => (
              <Table.Row key={`${issue.question}:${issue.line}`}>
                <Table.RowHeaderCell>{issue.custom_id}</Table.RowHeaderCell>
                <Table.Cell>{issue.line}</Table.Cell>
                <Table.Cell>{issue.question}</Table.Cell>
                <Table.Cell>
                  {name(issue.given)} ({issue.given_probability.toFixed(2)})
                </Table.Cell>
                <Table.Cell>
                  {name(issue.preferred)} ({issue.preferred_probability.toFixed(2)})
                </Table.Cell>
              </Table.Row>
            ))}
          </Table.Body>
        </Table.Root>
      )}
      {audit.has_more && (
        <Text as="p" size="2">
          The first {audit.issues.length} of {audit.suspected}; all of them: <Code>svc train report --label-issues</Code> or GET /v1/trainings/&#123;id&#125;/label_issues.
        </Text>
      )}
    </>
  );
}

/** The evaluation beside its baseline (the base's zero-shot answers, or chance), the reliability diagram, and the report. */
function Evaluation({ training, evaluation }: { training: Training; evaluation: NonNullable<Training["evaluation"]> }) {
  const { session } = useConsole();
  return (
    <>
      <Heading as="h3" size="3">
        Evaluation on {training.examples.held_out} examples, each held out once ({training.limits.acceptance.folds}-fold cross-validation): {evaluation.decision}
      </Heading>
      <Table.Root size="1">
        <caption className="visually-hidden">Evaluation</caption>
        <Table.Header>
          <Table.Row>
            <Table.ColumnHeaderCell>Question</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>Trained</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>{evaluation.baseline === "chance" ? "Chance" : "Zero-shot"}</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>ECE</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>Passed</Table.ColumnHeaderCell>
          </Table.Row>
        </Table.Header>
        <Table.Body>
          {evaluation.questions.map((q) => (
            <Table.Row key={q.question}>
              <Table.RowHeaderCell>{q.question}</Table.RowHeaderCell>
              <Table.Cell>
                {q.metric} {q.candidate.toFixed(3)}
              </Table.Cell>
              <Table.Cell>{q.zero_shot.toFixed(3)}</Table.Cell>
              <Table.Cell>{q.ece.toFixed(3)}</Table.Cell>
              <Table.Cell>{q.passed ? "yes" : "no"}</Table.Cell>
            </Table.Row>
          ))}
        </Table.Body>
      </Table.Root>
      <AuthorizedImage path={`/v1/trainings/${training.id}/report.svg`} credential={session.accessToken} alt={`Reliability diagram of the trained model and of ${evaluation.baseline === "chance" ? "chance" : "the base model's zero-shot answers"}`} />
      <ReportDetail id={training.id} />
    </>
  );
}
