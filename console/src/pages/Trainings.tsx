/**
 * Training jobs (runs in the browser): the account's trainings, a new one from a labelled JSONL file
 * (created, uploaded with its progress shown, submitted), its live progress (the step, examples read
 * per minute, the estimated completion, the cross-validated figures so far), its evaluation beside
 * the base model's zero-shot answers with the reliability diagram, its intervals, confusion matrix
 * and learning curve, and its activation state: "training passed"
 * once accepted, "API ready" once the serving side answers with the model's exact identity. Calls
 * with the signed-in session (training is a session route).
 */
import { Badge, Box, Button, Card, Code, Flex, Heading, Progress, Table, Text, TextField } from "@radix-ui/themes";
import { useCallback, useEffect, useState } from "react";
import { EvaluationReport, Training, TrainingList, isTrainingTerminal, type TrainingStatus } from "../../../contract/trainings.ts";
import { call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { AuthorizedImage, ConfirmDialog, ErrorCallout } from "../components.tsx";
import { JobFileForm, startJob, usePolledJob } from "../jobs.tsx";

const isTrainingEnded = (training: Training) => isTrainingTerminal(training.status);

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

export function TrainingsPage() {
  const { session } = useConsole();
  const [list, setList] = useState<TrainingList | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const load = useCallback(async () => {
    try {
      setList(TrainingList.parse((await call("/v1/trainings", session.accessToken)).plain));
    } catch (err) {
      setError(describe(err));
    }
  }, [session]);
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
      <NewTraining
        onCreated={(id) => {
          setOpen(id);
          void load();
        }}
      />
      <ErrorCallout error={error} />
      {open && <TrainingDetail id={open} onChange={() => void load()} />}
      {list && (
        <Table.Root variant="surface">
          <caption className="visually-hidden">Training jobs</caption>
          <Table.Header>
            <Table.Row>
              <Table.ColumnHeaderCell>Training</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>State</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell className="wide-only">Model</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell className="wide-only">Created</Table.ColumnHeaderCell>
            </Table.Row>
          </Table.Header>
          <Table.Body>
            {list.data.length === 0 && (
              <Table.Row>
                <Table.Cell colSpan={4}>No trainings yet.</Table.Cell>
              </Table.Row>
            )}
            {list.data.map((training) => (
              <Table.Row key={training.id}>
                <Table.RowHeaderCell>
                  <Button variant="ghost" onClick={() => setOpen(training.id)} aria-label={`Open training ${training.id}`}>
                    <Code variant="ghost">{training.id.slice(0, 8)}</Code>
                  </Button>
                </Table.RowHeaderCell>
                <Table.Cell>
                  <StateBadge status={training.status} />
                </Table.Cell>
                <Table.Cell className="wide-only">{training.model ?? "none"}</Table.Cell>
                <Table.Cell className="wide-only">{new Date(training.created_at).toLocaleString()}</Table.Cell>
              </Table.Row>
            ))}
          </Table.Body>
        </Table.Root>
      )}
    </Flex>
  );
}

function StateBadge({ status }: { status: TrainingStatus }) {
  const color = status === "ready" ? "green" : status === "accepted" ? "teal" : ["rejected", "failed", "expired"].includes(status) ? "red" : status === "cancelled" ? "gray" : "indigo";
  return (
    <Badge color={color} highContrast>
      {STATE_WORDS[status]}
    </Badge>
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
      start={async (file, progress) => onCreated(await startJob("/v1/trainings", session.accessToken, { model }, file, progress))}
    >
      <Box>
        <Text as="label" htmlFor="training-model" size="2" weight="medium">
          Base model
        </Text>
        <TextField.Root id="training-model" value={model} onChange={(event) => setModel(event.target.value)} />
      </Box>
    </JobFileForm>
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
                {q.question}: {q.candidate.primary_metric} {f3(q.candidate.primary)} [{f3(q.uncertainty.candidate_primary.low)}, {f3(q.uncertainty.candidate_primary.high)}] against zero-shot{" "}
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
                  <Table.ColumnHeaderCell key={q.question}>{q.question}: trained (zero-shot)</Table.ColumnHeaderCell>
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
    </>
  );
}

function TrainingDetail({ id, onChange }: { id: string; onChange(): void }) {
  const { session } = useConsole();
  const [training, setTraining] = useState<Training | null>(null);
  const [error, setError] = useState<string | null>(null);

  const read = useCallback(async () => {
    try {
      const next = Training.parse((await call(`/v1/trainings/${id}`, session.accessToken)).plain);
      setTraining(next);
      return next;
    } catch (err) {
      setError(describe(err));
      return null;
    }
  }, [id, session]);

  usePolledJob(read, isTrainingEnded, onChange);

  async function cancel() {
    try {
      setTraining(Training.parse((await call(`/v1/trainings/${id}/cancel`, session.accessToken, { method: "POST" })).plain));
      onChange();
    } catch (err) {
      setError(describe(err));
    }
  }

  if (!training) return <ErrorCallout error={error} />;
  const progress = training.progress;
  return (
    <Card>
      <Flex direction="column" gap="2">
        <Flex gap="2" align="center" wrap="wrap">
          <Heading as="h2" size="4">
            Training <Code variant="ghost">{training.id}</Code>
          </Heading>
          <StateBadge status={training.status} />
        </Flex>
        {training.model && (
          <Text size="2">
            Model: <Code>{training.model}</Code>
          </Text>
        )}
        {progress && (
          <>
            <Text as="p" size="2" id="training-progress-label">
              {progress.step}: {progress.examples_read} of {progress.examples_total} examples read
              {progress.examples_per_minute > 0 ? `, ${progress.examples_per_minute.toFixed(1)} a minute` : ""}
              {progress.estimated_completion_at ? `, done by about ${new Date(progress.estimated_completion_at).toLocaleTimeString()}` : ""}
            </Text>
            <Progress value={(100 * progress.examples_read) / Math.max(progress.examples_total, 1)} aria-labelledby="training-progress-label" />
          </>
        )}
        {training.error && <ErrorCallout error={`${training.error.message} (${training.error.code}${training.error.line === null ? "" : `, line ${training.error.line}`})`} />}
        <ErrorCallout error={error} />
        {training.evaluation && (
          <>
            <Heading as="h3" size="3">
              Evaluation on {training.examples.held_out} examples, each held out once ({training.limits.acceptance.folds}-fold cross-validation): {training.evaluation.decision}
            </Heading>
            <Table.Root size="1">
          <caption className="visually-hidden">Evaluation</caption>
              <Table.Header>
                <Table.Row>
                  <Table.ColumnHeaderCell>Question</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell>Trained</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell>Zero-shot</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell>ECE</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell>Passed</Table.ColumnHeaderCell>
                </Table.Row>
              </Table.Header>
              <Table.Body>
                {training.evaluation.questions.map((q) => (
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
            <AuthorizedImage path={`/v1/trainings/${training.id}/report.svg`} credential={session.accessToken} alt="Reliability diagram of the trained model and of the base model's zero-shot answers" />
            <ReportDetail id={training.id} />
          </>
        )}
        {!isTrainingTerminal(training.status) && training.status !== "accepted" && (
          <Box>
            <ConfirmDialog
              title="Cancel this training?"
              description="The job stops and no model is made from it."
              confirm="Cancel training"
              onConfirm={() => void cancel()}
              trigger={(openDialog) => (
                <Button color="red" variant="soft" onClick={openDialog}>
                  Cancel training
                </Button>
              )}
            />
          </Box>
        )}
      </Flex>
    </Card>
  );
}
