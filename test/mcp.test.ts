/**
 * The MCP server (clients/mcp) as an MCP host runs it: the built bundle started by Node over stdio
 * and driven by the MCP SDK's own client (`StdioClientTransport`), against the real stack. Where a
 * test must prove that nothing reached the service, the server is pointed at a loopback fake that
 * counts requests (test/support/fake-service.ts), and the real stack's usage rows are checked too.
 * The tools' schemas are checked against the OpenAPI document, since one converter writes both.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { Validator, type Schema } from "@cfworker/json-schema";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DecisionResponse } from "../contract/decision.ts";
import { ModelList } from "../contract/models.ts";
import { openApiDocument } from "../contract/openapi.ts";
import { VERSION } from "../clients/sdk-ts/src/index.ts";
import { buildClients, SVC_MCP } from "./support/cli.ts";
import { newAccount, query, stack } from "./support/api.ts";
import { fakeServiceAnswering, type Fake } from "./support/fake-service.ts";
import { animalSentences, noulFile, pollTraining, submitTraining } from "./support/training.ts";

type Account = Awaited<ReturnType<typeof newAccount>>;

let account: Account;
const dirs: string[] = [];
const open: Array<{ client: Client }> = [];
const fakes: Fake[] = [];

beforeAll(async () => {
  buildClients();
  account = await newAccount();
});

afterEach(async () => {
  await Promise.all(open.splice(0).map(({ client }) => client.close()));
  await Promise.all(fakes.splice(0).map((fake) => fake.stop()));
});

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function newHome(): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-mcp-home-"));
  dirs.push(dir);
  return dir;
}

/** The server started by an MCP client over stdio with `env` (and a fresh HOME); its stderr is kept. */
async function connect(env: Record<string, string> = {}): Promise<{ client: Client; stderr: () => string; transportErrors: Error[] }> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [SVC_MCP], env: { HOME: newHome(), ...env }, stderr: "pipe" });
  let stderr = "";
  (transport.stderr as PassThrough).on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const transportErrors: Error[] = [];
  const client = new Client({ name: "mcp-test", version: "1.0.0" });
  client.onerror = (err) => transportErrors.push(err);
  await client.connect(transport);
  open.push({ client });
  return { client, stderr: () => stderr, transportErrors };
}

/** The parts of a JSON Schema these tests read. */
interface JsonSchema {
  type?: string;
  const?: string;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  oneOf?: JsonSchema[];
  [keyword: string]: unknown;
}

const keyEnv = () => ({ SVC_API_KEY: account.key.secret, SVC_BASE_URL: stack().baseUrl });

function textOf(result: CallToolResult): string {
  const [first] = result.content;
  return first?.type === "text" ? first.text : "";
}

/** The problems `value` has against a tool's schema (draft 2020-12), as "where: what" lines. */
function schemaErrors(schema: Tool["inputSchema"] | Tool["outputSchema"] | Record<string, unknown>, value: unknown): string[] {
  const result = new Validator(schema as Schema, "2020-12", false).validate(value);
  return result.errors.map((e) => `${e.instanceLocation}: ${e.error}`);
}

async function countingFake(): Promise<Fake> {
  const fake = await fakeServiceAnswering(503);
  fakes.push(fake);
  return fake;
}

const DECIDE = { state: "I was charged twice for one order", questions: { refund: { type: "noul", instructions: "Does the customer want money back?" }, topic: { type: "choice", criteria: { billing: null, bug: "a defect" } } } };

describe("svc-mcp tools", () => {
  it("lists exactly list_models and decide, with decide's schema derived from the contract's request", async () => {
    const { client } = await connect();
    expect(client.getServerVersion()).toMatchObject({ name: "decision-service", version: VERSION });
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(["decide", "list_models"]);
    const list = tools.find((tool) => tool.name === "list_models")!;
    expect(list.inputSchema).toMatchObject({ type: "object", additionalProperties: false });
    expect(Object.keys(list.inputSchema.properties ?? {})).toEqual([]);
    const decide = tools.find((tool) => tool.name === "decide")!.inputSchema as JsonSchema;
    expect(decide).toMatchObject({ type: "object", required: ["state", "questions"], additionalProperties: false });
    expect(Object.keys(decide.properties!)).toEqual(["model", "state", "questions", "images"]);
    expect(decide.properties!.model).toMatchObject({ type: "string", minLength: 1, maxLength: 200 });
    expect(decide.properties!.questions).toMatchObject({ type: "object", minProperties: 1 });
    const kinds = (decide.properties!.questions!.additionalProperties as JsonSchema).oneOf!;
    expect(kinds.map((kind) => kind.properties!.type!.const)).toEqual(["noul", "choice", "score"]);
    expect(kinds[1]!.properties!.criteria).toMatchObject({ type: "object", minProperties: 2, maxProperties: 255 });
    expect(kinds[2]!.properties!.criteria).toMatchObject({ type: "array", minItems: 2, maxItems: 10 });
    for (const kind of kinds) expect(kind.additionalProperties).toBe(false);
  });

  it("declares an input and an output schema for every tool, the output being the contract's response", async () => {
    const { client } = await connect();
    const { tools } = await client.listTools();
    for (const tool of tools) {
      expect(tool.inputSchema, tool.name).toMatchObject({ type: "object" });
      expect(tool.outputSchema, tool.name).toMatchObject({ type: "object" });
    }
    const output = (name: string) => tools.find((tool) => tool.name === name)!.outputSchema;
    const components = openApiDocument().components.schemas;
    expect(output("list_models")).toEqual(components.ModelList);
    expect(output("decide")).toEqual(components.DecisionResponse);
  });

  it("describes decide's arguments as the OpenAPI document describes a decision request", async () => {
    const { client } = await connect();
    const decide = (await client.listTools()).tools.find((tool) => tool.name === "decide")!.inputSchema as JsonSchema;
    const request = openApiDocument().components.schemas.DecisionRequest as JsonSchema;
    for (const field of ["state", "questions", "images"]) expect(decide.properties![field], field).toEqual(request.properties![field]);
    // The tool's model has no fixed default (it is SVC_DEFAULT_MODEL); its bounds are the request's.
    const { default: fixed, ...model } = request.properties!.model!;
    expect(fixed).toBe("svc-shared");
    expect(decide.properties!.model).toEqual({ ...model, description: expect.stringMatching(/SVC_DEFAULT_MODEL/) });
    expect(decide.required).toEqual(request.required);

    const nullLevel = { state: "s", questions: { q: { type: "score", criteria: ["low", null] } } };
    const fewOptions = { state: "s", questions: { q: { type: "choice", criteria: { only: null } } } };
    const withImages = { ...DECIDE, images: [{ asset_id: "a" }] };
    for (const [name, schema] of [["decide", decide], ["DecisionRequest", request]] as const) {
      expect(schemaErrors(schema, DECIDE), name).toEqual([]);
      for (const refused of [nullLevel, fewOptions, withImages, { state: "s", questions: {} }]) {
        expect(schemaErrors(schema, refused), `${name} refuses ${JSON.stringify(refused)}`).not.toEqual([]);
      }
    }
    // Only the tool refuses unknown arguments: the service drops unknown fields of a request.
    expect(schemaErrors(decide, { ...DECIDE, temperature: 0 })).not.toEqual([]);
    expect(schemaErrors(request, { ...DECIDE, temperature: 0 })).toEqual([]);
  });

  it("list_models and decide work with a key from the environment", async () => {
    const { client } = await connect(keyEnv());
    const { tools } = await client.listTools();
    const outputSchema = (name: string) => tools.find((tool) => tool.name === name)!.outputSchema!;
    const models = (await client.callTool({ name: "list_models", arguments: {} })) as CallToolResult;
    expect(models.isError).toBeFalsy();
    expect(schemaErrors(outputSchema("list_models"), models.structuredContent)).toEqual([]);
    expect(ModelList.parse(JSON.parse(textOf(models))).models.map((m) => m.name)).toContain(stack().releaseId);
    expect(ModelList.parse(models.structuredContent).models.map((m) => m.aliases).flat()).toContain("svc-shared");

    const decided = (await client.callTool({ name: "decide", arguments: { ...DECIDE, questions: { ...DECIDE.questions, severity: { type: "score", criteria: ["none", "some", "severe"] } } } })) as CallToolResult;
    expect(decided.isError, textOf(decided)).toBeFalsy();
    expect(schemaErrors(outputSchema("decide"), decided.structuredContent)).toEqual([]);
    // The text content is the same JSON, for clients that read only `content`.
    expect(JSON.parse(textOf(decided))).toEqual(decided.structuredContent);
    const response = DecisionResponse.parse(JSON.parse(textOf(decided)));
    expect(response.model).toBe(stack().releaseId);
    expect([...response.answers.keys()]).toEqual(["refund", "topic", "severity"]);
    expect(response.answers.get("topic")).toMatchObject({ type: "choice" });
    expect(response.answers.get("severity")).toMatchObject({ type: "score" });
  });

  it("lists the account's trained model and decides with it; another question set is a tool error naming what differs", { timeout: 180_000 }, async () => {
    const question = { type: "noul", instructions: "Does this sentence belong to group A?" };
    const training = await submitTraining(account, await noulFile(question, animalSentences()));
    const trained = await pollTraining(account, training.id);
    expect(trained.status).toBe("ready");
    const { client } = await connect(keyEnv());
    const models = ModelList.parse((await client.callTool({ name: "list_models", arguments: {} })).structuredContent);
    expect(models.models.find((m) => m.name === trained.model)).toMatchObject({ evaluation: expect.stringContaining("/evaluation") });
    const decided = (await client.callTool({ name: "decide", arguments: { model: trained.model, state: "A goat on the hill.", questions: { q: question } } })) as CallToolResult;
    expect(decided.isError, textOf(decided)).toBeFalsy();
    const response = DecisionResponse.parse(decided.structuredContent);
    expect(response.model).toBe(trained.model);
    expect(response.answers.get("q")).toMatchObject({ type: "noul" });
    const other = (await client.callTool({ name: "decide", arguments: { model: trained.model, state: "A goat.", questions: { q: { type: "noul" } } } })) as CallToolResult;
    expect(other.isError).toBe(true);
    expect(textOf(other)).toContain("task_mismatch");
  });

  it("reads the key saved by `svc login` when the environment has none, and SVC_DEFAULT_MODEL for decide", async () => {
    const home = newHome();
    mkdirSync(join(home, ".svc"), { mode: 0o700 });
    writeFileSync(join(home, ".svc", "config.json"), JSON.stringify({ base_url: stack().baseUrl, api_key: account.key.secret }), { mode: 0o600 });
    const transport = new StdioClientTransport({ command: process.execPath, args: [SVC_MCP], env: { HOME: home, SVC_DEFAULT_MODEL: "no-such-model" }, stderr: "pipe" });
    const client = new Client({ name: "mcp-test", version: "1.0.0" });
    await client.connect(transport);
    open.push({ client });
    const models = (await client.callTool({ name: "list_models", arguments: {} })) as CallToolResult;
    expect(models.isError, textOf(models)).toBeFalsy();
    const missing = (await client.callTool({ name: "decide", arguments: DECIDE })) as CallToolResult;
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toMatch(/404/);
    const named = (await client.callTool({ name: "decide", arguments: { ...DECIDE, model: "svc-shared" } })) as CallToolResult;
    expect(named.isError, textOf(named)).toBeFalsy();
  });

  it("starts without a key; a call then answers how to sign in", async () => {
    const { client, stderr } = await connect();
    for (const [name, args] of [["list_models", {}], ["decide", DECIDE]] as const) {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(textOf(result)).toMatch(/svc login --api-key/);
      expect(textOf(result)).toMatch(/SVC_API_KEY/);
    }
    expect(stderr()).toMatch(/svc-mcp .* ready on stdio/);
  });

  it("refuses unknown and invalid arguments before sending anything to the service", async () => {
    const fake = await countingFake();
    const { client } = await connect({ SVC_API_KEY: account.key.secret, SVC_BASE_URL: fake.url });
    const refusals: Array<[string, Record<string, unknown>, RegExp]> = [
      ["decide", { ...DECIDE, api_key: account.key.secret }, /unknown argument "api_key"/],
      ["decide", { ...DECIDE, temperature: 0 }, /unknown argument "temperature"/],
      ["decide", { ...DECIDE, questions: { q: { type: "noul", weight: 2 } } }, /unknown argument "weight" in questions\.q/],
      ["decide", { ...DECIDE, questions: { q: { type: "choice", criteria: { only: null } } } }, /questions\.q\.criteria: a choice needs at least 2 options/],
      ["decide", { ...DECIDE, questions: { q: { type: "score", criteria: ["low", null] } } }, /questions\.q\.criteria\.1: a score level must not be null/],
      ["decide", { questions: DECIDE.questions }, /state/],
      ["decide", { state: "s", questions: {} }, /at least one question/],
      ["list_models", { verbose: true }, /unknown argument "verbose"/],
    ];
    for (const [name, args, message] of refusals) {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      expect(result.isError, JSON.stringify(args)).toBe(true);
      expect(textOf(result)).toMatch(message);
      expect(textOf(result)).toMatch(/nothing was sent/);
      expect(textOf(result)).not.toContain(account.key.secret);
    }
    expect(fake.requests).toBe(0);
    // The same server does reach that address with a valid call (the fake answers 503).
    const valid = (await client.callTool({ name: "list_models", arguments: {} })) as CallToolResult;
    expect(textOf(valid)).toMatch(/503/);
    expect(fake.requests).toBe(1);
  });

  it("records no usage on the real service for a refused call", async () => {
    const fresh = await newAccount();
    const { client } = await connect({ SVC_API_KEY: fresh.key.secret, SVC_BASE_URL: stack().baseUrl });
    const refused = (await client.callTool({ name: "decide", arguments: { ...DECIDE, extra: 1 } })) as CallToolResult;
    expect(refused.isError).toBe(true);
    const accepted = (await client.callTool({ name: "decide", arguments: DECIDE })) as CallToolResult;
    expect(accepted.isError, textOf(accepted)).toBeFalsy();
    // The accepted call's row shows that rows do appear; the refused one left none.
    const deadline = Date.now() + 3000;
    let rows: unknown[] = [];
    while (rows.length === 0 && Date.now() < deadline) {
      rows = await query("SELECT request_id FROM usage_records WHERE account_id = $1", [fresh.accountId]);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await query("SELECT request_id FROM usage_records WHERE account_id = $1", [fresh.accountId])).toHaveLength(1);
  });

  it("answers an API refusal as a tool error with the status and code", async () => {
    const { client } = await connect({ SVC_API_KEY: `svc_${"b".repeat(26)}_${"c".repeat(43)}`, SVC_BASE_URL: stack().baseUrl });
    const result = (await client.callTool({ name: "list_models", arguments: {} })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/401 invalid_credentials/);
  });

  it("refuses an unknown tool with a protocol error", async () => {
    const { client } = await connect(keyEnv());
    await expect(client.callTool({ name: "train", arguments: {} })).rejects.toThrow(/unknown tool/);
  });
});

describe("svc-mcp standard output", () => {
  it("carries nothing but protocol messages; logs go to standard error, without the key", async () => {
    const child = spawn(process.execPath, [SVC_MCP], { env: { PATH: process.env.PATH ?? "", HOME: newHome(), ...keyEnv() } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const send = (message: object) => child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
    const answered = (id: number) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no answer ${id}: ${stdout} ${stderr}`)), 60_000);
        const check = () => {
          if (stdout.split("\n").some((line) => line.includes(`"id":${id}`))) {
            clearTimeout(timer);
            resolve();
          } else setTimeout(check, 20);
        };
        check();
      });
    send({ id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
    await answered(1);
    send({ method: "notifications/initialized" });
    send({ id: 2, method: "tools/list" });
    send({ id: 3, method: "tools/call", params: { name: "list_models", arguments: {} } });
    send({ id: 4, method: "tools/call", params: { name: "decide", arguments: DECIDE } });
    send({ id: 5, method: "tools/call", params: { name: "decide", arguments: { ...DECIDE, unknown: true } } });
    await Promise.all([2, 3, 4, 5].map(answered));
    child.stdin.end();
    await new Promise((resolve) => child.on("close", resolve));

    const lines = stdout.split("\n").filter((line) => line !== "");
    expect(lines).toHaveLength(5);
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" });
    expect(lines.map((line) => JSON.parse(line).id).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(stderr).toMatch(/ready on stdio/);
    expect(stdout + stderr).not.toContain(account.key.secret);
  });
});
