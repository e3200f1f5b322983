/**
 * Try a decision (runs in the browser): a state and questions edited as JSON, or questions added
 * through a small form per type, sent to POST /v1/systemone with the API key in memory; the answer is
 * drawn as one bar per option with its probability, beside the confidence, the usage and the
 * Server-Timing of the call.
 */
import { Badge, Box, Button, Card, Flex, Heading, Text, TextArea, TextField } from "@radix-ui/themes";
import { useState } from "react";
import { DecisionResponse, type Answer } from "../../../contract/decision.ts";
import { parseJson, stringifyJson, toJsonMap, type Json } from "../../../contract/json.ts";
import { call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { ApiKeyField, Bar, ErrorCallout } from "../components.tsx";

const EXAMPLE_STATE = '{\n  "ticket": "I was charged twice for my order"\n}';
const EXAMPLE_QUESTIONS = '{\n  "refund": { "type": "noul", "instructions": "Does the customer ask for money back?" }\n}';

export function TryPage() {
  const { apiKey } = useConsole();
  const [model, setModel] = useState("svc-shared");
  const [state, setState] = useState(EXAMPLE_STATE);
  const [questions, setQuestions] = useState(EXAMPLE_QUESTIONS);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [reply, setReply] = useState<{ response: DecisionResponse; timing: string | null } | null>(null);

  async function decide(event: React.FormEvent) {
    event.preventDefault();
    setError(null);
    let body: string;
    try {
      body = `{"model":${JSON.stringify(model)},"state":${stringifyJson(parseJson(state))},"questions":${stringifyJson(parseJson(questions))}}`;
    } catch (err) {
      setError(`the state or the questions are not JSON: ${(err as Error).message}`);
      return;
    }
    setBusy(true);
    try {
      const answer = await call("/v1/systemone", apiKey, { body });
      setReply({ response: DecisionResponse.parse(answer.body), timing: answer.headers.get("server-timing") });
    } catch (err) {
      setReply(null);
      setError(describe(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        Try a decision
      </Heading>
      <form onSubmit={(event) => void decide(event)}>
        <Flex direction="column" gap="3">
          <ApiKeyField />
          <Box>
            <Text as="label" htmlFor="model" size="2" weight="medium">
              Model
            </Text>
            <TextField.Root id="model" value={model} onChange={(event) => setModel(event.target.value)} />
          </Box>
          <Box>
            <Text as="label" htmlFor="state" size="2" weight="medium">
              State (JSON)
            </Text>
            <TextArea id="state" className="json" rows={5} value={state} onChange={(event) => setState(event.target.value)} />
          </Box>
          <Box>
            <Text as="label" htmlFor="questions" size="2" weight="medium">
              Questions (JSON)
            </Text>
            <TextArea id="questions" className="json" rows={6} value={questions} onChange={(event) => setQuestions(event.target.value)} />
          </Box>
          <AddQuestion onAdd={(id, question) => setQuestions(withQuestion(questions, id, question))} onError={setError} />
          <Box>
            <Button type="submit" size="3" disabled={busy || !apiKey}>
              {busy ? "Deciding…" : "Decide"}
            </Button>
          </Box>
        </Flex>
      </form>
      <ErrorCallout error={error} />
      {reply && <Reply response={reply.response} timing={reply.timing} />}
    </Flex>
  );
}

/** The questions' JSON with one more question (or one replaced), key order kept. */
function withQuestion(text: string, id: string, question: Json): string {
  const current = toJsonMap(parseJson(text.trim() || "{}"));
  if (!(current instanceof Map)) throw new Error("the questions must be a JSON object");
  current.set(id, question);
  return pretty(current);
}

/**
 * JSON laid out on lines, keys in their order: JSON.stringify would move integer-like keys ("10")
 * first, and the order of questions and options is part of a request.
 */
function pretty(value: Json, indent = ""): string {
  const inner = `${indent}  `;
  if (Array.isArray(value)) return value.length === 0 ? "[]" : `[\n${value.map((item) => inner + pretty(item, inner)).join(",\n")}\n${indent}]`;
  if (value !== null && typeof value === "object") {
    const entries = value instanceof Map ? [...value] : Object.entries(value);
    return entries.length === 0 ? "{}" : `{\n${entries.map(([key, item]) => `${inner}${JSON.stringify(key)}: ${pretty(item, inner)}`).join(",\n")}\n${indent}}`;
  }
  return stringifyJson(value);
}

/** A small form per question type that writes the question into the JSON above. */
function AddQuestion({ onAdd, onError }: { onAdd(id: string, question: Json): void; onError(message: string): void }) {
  const [type, setType] = useState<"noul" | "choice" | "score">("noul");
  const [id, setId] = useState("");
  const [instructions, setInstructions] = useState("");
  const [options, setOptions] = useState("");
  const names = options
    .split(",")
    .map((name) => name.trim())
    .filter(Boolean);
  function add() {
    if (!id.trim() || !instructions.trim()) return onError("a question needs an id and instructions");
    if (type !== "noul" && names.length < 2) return onError(`a ${type} question needs at least two ${type === "choice" ? "options" : "levels"}, separated by commas`);
    const question: Json =
      type === "noul"
        ? { type, instructions }
        : type === "choice"
          ? { type, instructions, criteria: new Map(names.map((name) => [name, null])) }
          : { type, instructions, criteria: names };
    try {
      onAdd(id.trim(), question);
      setId("");
      setInstructions("");
      setOptions("");
    } catch (err) {
      onError((err as Error).message);
    }
  }
  return (
    <Card>
      <Flex direction="column" gap="2" asChild>
        <fieldset style={{ border: 0, padding: 0, margin: 0 }}>
          <legend>
            <Text weight="medium">Add a question</Text>
          </legend>
          <Flex gap="2" wrap="wrap" align="end">
            <Box>
              <Text as="label" htmlFor="question-type" size="2" style={{ display: "block" }}>
                Type
              </Text>
              <select id="question-type" className="native-select" value={type} onChange={(event) => setType(event.target.value as typeof type)}>
                <option value="noul">yes/no (noul)</option>
                <option value="choice">one of N (choice)</option>
                <option value="score">ordered levels (score)</option>
              </select>
            </Box>
            <Box style={{ flex: "1 1 120px" }}>
              <Text as="label" htmlFor="question-id" size="2">
                Id
              </Text>
              <TextField.Root id="question-id" value={id} onChange={(event) => setId(event.target.value)} />
            </Box>
            <Box style={{ flex: "3 1 240px" }}>
              <Text as="label" htmlFor="question-instructions" size="2">
                Instructions
              </Text>
              <TextField.Root id="question-instructions" value={instructions} onChange={(event) => setInstructions(event.target.value)} />
            </Box>
          </Flex>
          {type !== "noul" && (
            <Box>
              <Text as="label" htmlFor="question-options" size="2">
                {type === "choice" ? "Options" : "Levels, lowest first"} (comma separated)
              </Text>
              <TextField.Root id="question-options" value={options} onChange={(event) => setOptions(event.target.value)} />
            </Box>
          )}
          <Box>
            <Button type="button" variant="soft" onClick={add}>
              Add question
            </Button>
          </Box>
        </fieldset>
      </Flex>
    </Card>
  );
}

function Reply({ response, timing }: { response: DecisionResponse; timing: string | null }) {
  return (
    <Flex direction="column" gap="3" aria-live="polite">
      <Heading as="h2" size="4">
        Answer from {response.model}
      </Heading>
      {[...response.answers].map(([id, answer]) => (
        <AnswerCard key={id} id={id} answer={answer} />
      ))}
      <Text size="2">
        Usage: {response.usage.input_tokens} input tokens evaluated
        {response.usage.billable_input_tokens !== undefined ? `, ${response.usage.billable_input_tokens} billable` : ""}, {response.usage.output_tokens} output.
      </Text>
      {timing && (
        <Text size="2">
          Server-Timing: <code>{timing}</code>
        </Text>
      )}
    </Flex>
  );
}

function AnswerCard({ id, answer }: { id: string; answer: Answer }) {
  return (
    <Card>
      <Flex direction="column" gap="2">
        <Flex gap="2" align="center" wrap="wrap">
          <Heading as="h3" size="3">
            {id}
          </Heading>
          <Badge>{answer.type}</Badge>
          {answer.type === "choice" && <Text size="2">choice: {answer.choice}</Text>}
          {answer.type === "score" && <Text size="2">score: {answer.score.toFixed(2)}</Text>}
          {answer.type !== "noul" && <Text size="2">confidence: {answer.confidence.toFixed(3)}</Text>}
        </Flex>
        {answer.type === "noul" ? (
          <>
            <Bar label="yes" value={answer.noul} />
            <Bar label="no" value={1 - answer.noul} />
          </>
        ) : answer.type === "choice" ? (
          [...answer.probabilities].map(([name, p]) => <Bar key={name} label={name} value={p} />)
        ) : (
          [...answer.probabilities].map(([level, p]) => <Bar key={level} label={String(stringifyJson(answer.legend.get(level) ?? level))} value={p} />)
        )}
      </Flex>
    </Card>
  );
}
