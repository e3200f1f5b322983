/**
 * Image decisions (runs in the browser; IMAGE_BROWSER): the account's image models with their state
 * and saved task, the prepaid credit, one photo classified by an API-ready model (the answers'
 * probabilities given a known answer, the unknown mass, the confidence, "Needs review" when unknown
 * is the most likely), and the batch tool: many photos submitted one at a time, completed results
 * kept, a pause on a credit error (402) with the balance shown, and resume. Session calls only.
 */
import { Badge, Box, Button, Card, Code, Flex, Heading, Table, Text } from "@radix-ui/themes";
import { useCallback, useEffect, useRef, useState } from "react";
import { CreditBalance } from "../../../contract/credit.ts";
import { ImageModelList, type ImageModel } from "../../../contract/image-models.ts";
import { ApiError, call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { Bar, ErrorCallout, PageLink } from "../components.tsx";
import { decideImage, uploadPhoto, type ImageAnswer } from "../images.ts";
import { IMAGE_MODEL_ANCHOR } from "./ImageTraining.tsx";

const usd = (micro: number) => `$${(micro / 1e6).toFixed(6)}`;

export function ImagesPage() {
  const { session } = useConsole();
  const [models, setModels] = useState<ImageModel[] | null>(null);
  const [chosen, setChosen] = useState<string>("");
  const [credit, setCredit] = useState<CreditBalance | null>(null);
  const [error, setError] = useState<string | null>(null);

  const readCredit = useCallback(async () => {
    try {
      setCredit(CreditBalance.parse((await call("/v1/image-credit", session.accessToken)).plain));
    } catch (err) {
      setError(describe(err));
    }
  }, [session]);

  useEffect(() => {
    call("/v1/image-models", session.accessToken).then(
      (reply) => {
        const list = ImageModelList.parse(reply.plain).data;
        setModels(list);
        setChosen((current) => current || list.find((m) => m.state === "api_ready")?.id || "");
      },
      (err: unknown) => setError(describe(err)),
    );
    void readCredit();
  }, [session, readCredit]);

  const model = models?.find((m) => m.id === chosen && m.state === "api_ready") ?? null;
  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        Image decisions
      </Heading>
      <ErrorCallout error={error} />
      <Text as="p" aria-live="polite">
        Image credit: {credit ? `${usd(credit.balance_micro_usd)} available (${usd(credit.reserved_micro_usd)} reserved), ${credit.pricing.micro_usd_per_billable_token} micro-USD per billable token` : "…"}
      </Text>
      {models && (
        <Table.Root variant="surface">
          <caption className="visually-hidden">Image models</caption>
          <Table.Header>
            <Table.Row>
              <Table.ColumnHeaderCell>Model</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>State</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell>Question</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell className="wide-only">Held-out accuracy</Table.ColumnHeaderCell>
            </Table.Row>
          </Table.Header>
          <Table.Body>
            {models.length === 0 && (
              <Table.Row>
                <Table.Cell colSpan={4}>
                  No image models yet: <PageLink to={`/console/trainings#${IMAGE_MODEL_ANCHOR}`} underline="always">train one from your photos</PageLink> under Training.
                </Table.Cell>
              </Table.Row>
            )}
            {models.map((m) => (
              <Table.Row key={m.training}>
                <Table.RowHeaderCell>{m.id ? <Code variant="ghost">{m.id}</Code> : "(rejected: no id)"}</Table.RowHeaderCell>
                <Table.Cell>
                  <Badge color={m.state === "api_ready" ? "green" : m.state === "rejected" ? "red" : "teal"} highContrast>
                    {m.state === "api_ready" ? "API ready" : m.state === "rejected" ? "rejected" : "training passed"}
                  </Badge>
                </Table.Cell>
                <Table.Cell>
                  {m.task.question_id}: {m.task.outcome_order.join(", ")}
                </Table.Cell>
                <Table.Cell className="wide-only">{m.evaluation ? `${m.evaluation.accuracy.toFixed(3)} (chance ${m.evaluation.chance.toFixed(3)})` : "none"}</Table.Cell>
              </Table.Row>
            ))}
          </Table.Body>
        </Table.Root>
      )}
      <Box>
        <Text as="label" htmlFor="image-model" size="2" weight="medium" style={{ display: "block" }}>
          Image model (API ready)
        </Text>
        <select id="image-model" className="native-select" value={chosen} onChange={(event) => setChosen(event.target.value)}>
          <option value="">choose a model</option>
          {models
            ?.filter((m) => m.state === "api_ready")
            .map((m) => (
              <option key={m.id} value={m.id!}>
                {m.id} ({m.task.outcome_order.join(", ")})
              </option>
            ))}
        </select>
      </Box>
      {model && <OnePhoto model={model} onDone={() => void readCredit()} />}
      {model && <BatchTool model={model} credit={credit} readCredit={readCredit} />}
    </Flex>
  );
}

function AnswerView({ result }: { result: ImageAnswer }) {
  const { answer, needsReview } = result;
  return (
    <Flex direction="column" gap="2">
      <Flex gap="2" align="center" wrap="wrap">
        {needsReview ? (
          <Badge color="amber" highContrast size="2">
            Needs review
          </Badge>
        ) : (
          <Text weight="bold">{answer.choice}</Text>
        )}
        <Text size="2">confidence {answer.confidence.toFixed(3)} (the distribution&apos;s concentration, not a probability of being right)</Text>
      </Flex>
      <Text size="2">Probabilities given a known answer:</Text>
      {[...answer.probabilities].map(([name, p]) => (
        <Bar key={name} label={name} value={p} />
      ))}
      <Bar label="unknown (none of these)" value={answer.unknown_probability ?? 0} />
    </Flex>
  );
}

function OnePhoto({ model, onDone }: { model: ImageModel; onDone(): void }) {
  const { session } = useConsole();
  const [file, setFile] = useState<File | null>(null);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<ImageAnswer | null>(null);
  const [error, setError] = useState<string | null>(null);

  async function classify(event: React.FormEvent) {
    event.preventDefault();
    if (!file) return;
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      setResult(await decideImage(model, await uploadPhoto(file, session.accessToken), session.accessToken));
    } catch (err) {
      setError(describe(err));
    } finally {
      setBusy(false);
      onDone();
    }
  }

  return (
    <Card>
      <form onSubmit={(event) => void classify(event)}>
        <Flex direction="column" gap="2">
          <Heading as="h2" size="4">
            One photo
          </Heading>
          <Text as="label" htmlFor="photo" size="2">
            Photo (JPEG or PNG)
          </Text>
          <input id="photo" type="file" accept="image/jpeg,image/png,.jpg,.jpeg,.png" onChange={(event) => setFile(event.target.files?.[0] ?? null)} />
          <Box>
            <Button type="submit" disabled={!file || busy}>
              {busy ? "Classifying…" : "Classify"}
            </Button>
          </Box>
          <ErrorCallout error={error} />
          {result && <AnswerView result={result} />}
        </Flex>
      </form>
    </Card>
  );
}

interface Row {
  name: string;
  result: ImageAnswer | null;
  error: string | null;
}

/** Many photos, one at a time; completed results kept; a credit error pauses until resumed. */
function BatchTool({ model, credit, readCredit }: { model: ImageModel; credit: CreditBalance | null; readCredit(): Promise<void> }) {
  const { session } = useConsole();
  const [files, setFiles] = useState<File[]>([]);
  const [rows, setRows] = useState<Row[]>([]);
  const [state, setState] = useState<"idle" | "running" | "paused" | "done">("idle");
  /** The next photo to submit: kept across a pause, so resuming continues where it stopped. */
  const next = useRef(0);

  async function run() {
    setState("running");
    while (next.current < files.length) {
      const file = files[next.current]!;
      try {
        const result = await decideImage(model, await uploadPhoto(file, session.accessToken), session.accessToken);
        setRows((done) => [...done, { name: file.name, result, error: null }]);
      } catch (err) {
        if (err instanceof ApiError && err.status === 402) {
          // Paused on this photo, which resumes first: nothing was charged for it.
          await readCredit();
          setState("paused");
          return;
        }
        setRows((done) => [...done, { name: file.name, result: null, error: describe(err) }]);
      }
      next.current += 1;
    }
    await readCredit();
    setState("done");
  }

  return (
    <Card>
      <Flex direction="column" gap="2">
        <Heading as="h2" size="4">
          Batch of photos
        </Heading>
        <Text as="label" htmlFor="photos" size="2">
          Photos (submitted one at a time; completed results are kept)
        </Text>
        <input
          id="photos"
          type="file"
          multiple
          accept="image/jpeg,image/png,.jpg,.jpeg,.png"
          disabled={state === "running" || state === "paused"}
          onChange={(event) => {
            setFiles([...(event.target.files ?? [])]);
            setRows([]);
            next.current = 0;
            setState("idle");
          }}
        />
        <Text size="2" aria-live="polite">
          {rows.length} of {files.length} done{state === "running" ? ", running" : ""}
        </Text>
        {state === "paused" && (
          <ErrorCallout error={`Paused: the image credit does not cover the next photo (${credit ? usd(credit.balance_micro_usd) : "?"} available). Add credit, then resume.`} />
        )}
        <Flex gap="2">
          {(state === "idle" || state === "done") && (
            <Button onClick={() => void run()} disabled={files.length === 0 || state === "done"}>
              Start
            </Button>
          )}
          {state === "paused" && <Button onClick={() => void run()}>Resume</Button>}
        </Flex>
        {rows.length > 0 && (
          <Table.Root size="1">
          <caption className="visually-hidden">Photo results</caption>
            <Table.Header>
              <Table.Row>
                <Table.ColumnHeaderCell>Photo</Table.ColumnHeaderCell>
                <Table.ColumnHeaderCell>Answer</Table.ColumnHeaderCell>
              </Table.Row>
            </Table.Header>
            <Table.Body>
              {rows.map((row, i) => (
                <Table.Row key={`${i}-${row.name}`}>
                  <Table.RowHeaderCell>{row.name}</Table.RowHeaderCell>
                  <Table.Cell>
                    {row.error ? (
                      <Text color="red" highContrast>
                        {row.error}
                      </Text>
                    ) : row.result!.needsReview ? (
                      "Needs review"
                    ) : (
                      `${row.result!.answer.choice} (${(row.result!.answer.probabilities.get(row.result!.answer.choice) ?? 0).toFixed(3)}, unknown ${(row.result!.answer.unknown_probability ?? 0).toFixed(3)})`
                    )}
                  </Table.Cell>
                </Table.Row>
              ))}
            </Table.Body>
          </Table.Root>
        )}
      </Flex>
    </Card>
  );
}
