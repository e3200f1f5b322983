/**
 * Batches (runs in the browser): the account's batches, newest first; a new batch from a JSONL file
 * (created, uploaded through its signed PUT with the upload's progress shown, submitted); a batch's
 * live progress (records per minute and the estimated completion, polled), its cancellation after a
 * confirmation, and its results page by page once it has finished. Calls with the API key in memory.
 */
import { Box, Button, Flex, Heading, Table, Text } from "@radix-ui/themes";
import { useEffect, useState } from "react";
import { Batch, BatchList, isTerminal, RecordError } from "../../../contract/batches.ts";
import { DecisionResponse } from "../../../contract/decision.ts";
import { toRecord, type Json } from "../../../contract/json.ts";
import { call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { ApiKeyField, ErrorCallout } from "../components.tsx";
import { doneBy, JobDetail, JobFileForm, JobList, JobProgress, startJob, useJobList, type JobKind } from "../jobs.tsx";
import { answerSummary } from "./answers.ts";

/** What a batch adds to the job lifecycle (jobs.tsx): the API key, and results once it has finished. */
const BATCHES: JobKind<Batch> = {
  path: "/v1/batches",
  noun: "batch",
  plural: "batches",
  heading: "Batches",
  statusHeading: "Status",
  schema: Batch,
  listSchema: BatchList,
  credential: (state) => state.apiKey,
  ended: (batch) => isTerminal(batch.status),
  cancellable: (batch) => !isTerminal(batch.status),
  cancelWarning: "Records not yet processed are not processed; results already committed stay.",
};

const recordsDone = (batch: Batch) => batch.request_counts.completed + batch.request_counts.failed;

export function BatchesPage() {
  const { apiKey } = useConsole();
  const jobs = useJobList(BATCHES);
  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        Batches
      </Heading>
      <ApiKeyField />
      <Box>
        <Button onClick={() => void jobs.load()} disabled={!apiKey}>
          List batches
        </Button>
      </Box>
      <NewBatch onCreated={jobs.created} />
      <ErrorCallout error={jobs.error} />
      {jobs.open && (
        <JobDetail
          kind={BATCHES}
          id={jobs.open}
          onChange={jobs.reload}
          body={(batch) => <BatchProgress batch={batch} />}
          footer={(batch) => isTerminal(batch.status) && batch.status !== "failed" && <Results id={batch.id} />}
        />
      )}
      <JobList kind={BATCHES} jobs={jobs} columns={[{ header: "Records", cell: (batch) => `${recordsDone(batch)} of ${batch.request_counts.total}` }]} />
    </Flex>
  );
}

/** A JSONL file made into a batch: created, uploaded (its progress shown), submitted. */
function NewBatch({ onCreated }: { onCreated(id: string): void }) {
  const { apiKey } = useConsole();
  return (
    <JobFileForm
      inputId="batch-file"
      label={<>New batch from a JSONL file (one {"{"}&quot;custom_id&quot;, &quot;body&quot;{"}"} per line)</>}
      button="Upload and submit"
      disabled={!apiKey}
      start={async (file, progress) => onCreated(await startJob(BATCHES, apiKey, {}, file, progress))}
    />
  );
}

/** Records done of the total, the rate and the estimated completion. */
function BatchProgress({ batch }: { batch: Batch }) {
  const { total, failed } = batch.request_counts;
  return (
    <JobProgress kind={BATCHES} value={total > 0 ? (100 * recordsDone(batch)) / total : 0}>
      {recordsDone(batch)} of {total} records done ({failed} failed)
      {batch.progress ? `, ${batch.progress.records_per_minute.toFixed(1)} records a minute` : ""}
      {doneBy(batch.progress?.estimated_completion_at)}
    </JobProgress>
  );
}

interface ResultRow {
  customId: string;
  text: string;
  failed: boolean;
}

/** A results page as the contract reads it: answers keep their order (objects are Maps). */
function resultRows(body: Json): { rows: ResultRow[]; next: number | null } {
  const page = body as Map<string, Json>;
  const rows = (page.get("data") as Map<string, Json>[]).map((record) => {
    const customId = String(record.get("custom_id"));
    if (record.has("error")) {
      const error = RecordError.parse(toRecord(record.get("error")));
      return { customId, text: `${error.message} (${error.code}, ${error.status})`, failed: true };
    }
    const response = DecisionResponse.parse(record.get("response"));
    return { customId, text: [...response.answers].map(([question, answer]) => `${question}: ${answerSummary(answer)}`).join("; "), failed: false };
  });
  const next = page.get("next_cursor");
  return { rows, next: typeof next === "number" ? next : null };
}

function Results({ id }: { id: string }) {
  const { apiKey } = useConsole();
  const [pages, setPages] = useState<number[]>([0]);
  const [page, setPage] = useState<{ rows: ResultRow[]; next: number | null } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const after = pages[pages.length - 1]!;

  useEffect(() => {
    call(`/v1/batches/${id}/results?after=${after}`, apiKey).then(
      (reply) => setPage(resultRows(reply.body)),
      (err: unknown) => setError(describe(err)),
    );
  }, [id, apiKey, after]);

  return (
    <Flex direction="column" gap="2">
      <Heading as="h3" size="3">
        Results
      </Heading>
      <ErrorCallout error={error} />
      {page && (
        <Table.Root size="1">
          <caption className="visually-hidden">Results</caption>
          <Table.Header>
            <Table.Row>
              <Table.ColumnHeaderCell>custom_id</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Answer or error</Table.ColumnHeaderCell>
            </Table.Row>
          </Table.Header>
          <Table.Body>
            {page.rows.map((row) => (
              <Table.Row key={row.customId}>
                <Table.RowHeaderCell>{row.customId}</Table.RowHeaderCell>
                <Table.Cell>{row.failed ? <Text color="red" highContrast>{row.text}</Text> : row.text}</Table.Cell>
              </Table.Row>
            ))}
          </Table.Body>
        </Table.Root>
      )}
      <Flex gap="2">
        <Button variant="soft" disabled={pages.length < 2} onClick={() => setPages(pages.slice(0, -1))}>
          Previous page
        </Button>
        <Button variant="soft" disabled={!page?.next} onClick={() => page?.next && setPages([...pages, page.next])}>
          Next page
        </Button>
      </Flex>
    </Flex>
  );
}
