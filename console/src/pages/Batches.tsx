/**
 * Batches (runs in the browser): the account's batches, newest first; a new batch from a JSONL file
 * (created, uploaded through its signed PUT with the upload's progress shown, submitted); a batch's
 * live progress (records per minute and the estimated completion, polled), its cancellation after a
 * confirmation, and its results page by page once it has finished. Calls with the API key in memory.
 */
import { Badge, Box, Button, Card, Code, Flex, Heading, Progress, Table, Text } from "@radix-ui/themes";
import { useCallback, useEffect, useState } from "react";
import { Batch, BatchList, isTerminal, RecordError } from "../../../contract/batches.ts";
import { DecisionResponse } from "../../../contract/decision.ts";
import { toRecord, type Json } from "../../../contract/json.ts";
import { call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { ApiKeyField, ConfirmDialog, ErrorCallout } from "../components.tsx";
import { JobFileForm, startJob, usePolledJob } from "../jobs.tsx";
import { answerSummary } from "./answers.ts";

const isBatchEnded = (batch: Batch) => isTerminal(batch.status);

export function BatchesPage() {
  const { apiKey } = useConsole();
  const [list, setList] = useState<BatchList | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const load = useCallback(
    async (after?: string) => {
      setError(null);
      try {
        setList(BatchList.parse((await call(`/v1/batches${after ? `?after=${encodeURIComponent(after)}` : ""}`, apiKey)).plain));
      } catch (err) {
        setError(describe(err));
      }
    },
    [apiKey],
  );

  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        Batches
      </Heading>
      <Flex gap="2" align="end" wrap="wrap">
        <ApiKeyField />
        <Button onClick={() => void load()} disabled={!apiKey}>
          List batches
        </Button>
      </Flex>
      <NewBatch
        onCreated={(id) => {
          setOpen(id);
          void load();
        }}
      />
      <ErrorCallout error={error} />
      {open && <BatchDetail id={open} onChange={() => void load()} />}
      {list && (
        <>
          <Table.Root variant="surface">
          <caption className="visually-hidden">Batches</caption>
            <Table.Header>
              <Table.Row>
                <Table.ColumnHeaderCell>Batch</Table.ColumnHeaderCell>
                <Table.ColumnHeaderCell>Status</Table.ColumnHeaderCell>
                <Table.ColumnHeaderCell>Records</Table.ColumnHeaderCell>
                <Table.ColumnHeaderCell className="wide-only">Created</Table.ColumnHeaderCell>
              </Table.Row>
            </Table.Header>
            <Table.Body>
              {list.data.length === 0 && (
                <Table.Row>
                  <Table.Cell colSpan={4}>No batches yet.</Table.Cell>
                </Table.Row>
              )}
              {list.data.map((batch) => (
                <Table.Row key={batch.id}>
                  <Table.RowHeaderCell>
                    <Button variant="ghost" onClick={() => setOpen(batch.id)} aria-label={`Open batch ${batch.id}`}>
                      <Code variant="ghost">{batch.id.slice(0, 8)}</Code>
                    </Button>
                  </Table.RowHeaderCell>
                  <Table.Cell>
                    <StatusBadge status={batch.status} />
                  </Table.Cell>
                  <Table.Cell>
                    {batch.request_counts.completed + batch.request_counts.failed} of {batch.request_counts.total}
                  </Table.Cell>
                  <Table.Cell className="wide-only">{new Date(batch.created_at).toLocaleString()}</Table.Cell>
                </Table.Row>
              ))}
            </Table.Body>
          </Table.Root>
          {list.has_more && list.next_cursor && (
            <Box>
              <Button variant="soft" onClick={() => void load(list.next_cursor!)}>
                Older batches
              </Button>
            </Box>
          )}
        </>
      )}
    </Flex>
  );
}

function StatusBadge({ status }: { status: Batch["status"] }) {
  const color = status === "completed" ? "green" : status === "failed" || status === "expired" ? "red" : status === "cancelled" ? "gray" : "indigo";
  return (
    <Badge color={color} highContrast>
      {status}
    </Badge>
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
      start={async (file, progress) => onCreated(await startJob("/v1/batches", apiKey, {}, file, progress))}
    />
  );
}

function BatchDetail({ id, onChange }: { id: string; onChange(): void }) {
  const { apiKey } = useConsole();
  const [batch, setBatch] = useState<Batch | null>(null);
  const [error, setError] = useState<string | null>(null);

  const read = useCallback(async () => {
    try {
      const next = Batch.parse((await call(`/v1/batches/${id}`, apiKey)).plain);
      setBatch(next);
      return next;
    } catch (err) {
      setError(describe(err));
      return null;
    }
  }, [id, apiKey]);

  usePolledJob(read, isBatchEnded, onChange);

  async function cancel() {
    try {
      setBatch(Batch.parse((await call(`/v1/batches/${id}/cancel`, apiKey, { method: "POST" })).plain));
      onChange();
    } catch (err) {
      setError(describe(err));
    }
  }

  if (!batch) return <ErrorCallout error={error} />;
  const done = batch.request_counts.completed + batch.request_counts.failed;
  const share = batch.request_counts.total > 0 ? (100 * done) / batch.request_counts.total : 0;
  return (
    <Card>
      <Flex direction="column" gap="2">
        <Flex gap="2" align="center" wrap="wrap">
          <Heading as="h2" size="4">
            Batch <Code variant="ghost">{batch.id}</Code>
          </Heading>
          <StatusBadge status={batch.status} />
        </Flex>
        <Text as="p" size="2" id="batch-progress-label">
          {done} of {batch.request_counts.total} records done ({batch.request_counts.failed} failed)
          {batch.progress ? `, ${batch.progress.records_per_minute.toFixed(1)} records a minute` : ""}
          {batch.progress?.estimated_completion_at ? `, done by about ${new Date(batch.progress.estimated_completion_at).toLocaleTimeString()}` : ""}
        </Text>
        <Progress value={share} aria-labelledby="batch-progress-label" />
        {batch.error && <ErrorCallout error={`${batch.error.message} (${batch.error.code}${batch.error.line === null ? "" : `, line ${batch.error.line}`})`} />}
        <ErrorCallout error={error} />
        {!isTerminal(batch.status) && (
          <Box>
            <ConfirmDialog
              title="Cancel this batch?"
              description="Records not yet processed are not processed; results already committed stay."
              confirm="Cancel batch"
              onConfirm={() => void cancel()}
              trigger={(openDialog) => (
                <Button color="red" variant="soft" onClick={openDialog}>
                  Cancel batch
                </Button>
              )}
            />
          </Box>
        )}
        {isTerminal(batch.status) && batch.status !== "failed" && <Results id={batch.id} />}
      </Flex>
    </Card>
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
