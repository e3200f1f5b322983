/**
 * The Python SDK (clients/sdk-python) against the real stack: its package is built and installed in
 * a venv with its pinned tools, `mypy --strict` checks it, and its pytest suite runs with the stack's
 * address and fresh keys in the environment (the suite covers every resource, the errors the stack
 * gives on demand, retries, connections, settings and the contract; faults the stack cannot show come
 * from the named fakes of clients/sdk-python/tests/fakes.py). Trainings take the signed-in user's
 * access token: the suite gets the main account's, and a small training file (one training, ready in
 * seconds, test/support/training.ts); image assets, photos written by sharp here (Pillow is no tool
 * of the suite); the image credit, image models and image decisions, the main account as it is (no
 * credit, no image model); webhooks, real deliveries by the stack's sidecar to a receiver on loopback
 * here (test/support/webhook-receiver.ts), whose requests the suite reads at a second loopback
 * address and verifies with the SDK. Either tool failing fails this test, with its output.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Batch } from "../contract/batches.ts";
import { LIMITS } from "../contract/limits.ts";
import { setSettings } from "../ops/accounts.ts";
import { call, newAccount, stack, withDb } from "./support/api.ts";
import { photo } from "./support/images.ts";
import { contractDump, PYTHON_SDK_DIR, pythonSdkVenv, runTool } from "./support/python-sdk.ts";
import { finishDirectly } from "./support/sdk.ts";
import { animalSentences, noulFile } from "./support/training.ts";
import { startReceiver, type Receiver } from "./support/webhook-receiver.ts";

const PAGED_RECORDS = 45;
/** The task of the suite's one training: what "group A" is, only the examples say (test/trainings.test.ts). */
const GROUP_A = { type: "noul", instructions: "Does this sentence belong to group A?" };

let venv: Awaited<ReturnType<typeof pythonSdkVenv>>;
let workDir: string;
let receiver: Receiver;
let received: Server;

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), "python-sdk-"));
  receiver = await startReceiver();
  // What the receiver got, for the suite to verify: GET answers every request as {headers, body, at}.
  received = createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(receiver.received)));
  await new Promise<void>((resolve) => received.listen(0, "127.0.0.1", resolve));
  venv = await pythonSdkVenv();
}, 600_000);

afterAll(async () => {
  await receiver?.close();
  received?.closeAllConnections();
  await new Promise<void>((resolve) => (received ? received.close(() => resolve()) : resolve()));
  rmSync(workDir, { recursive: true, force: true });
});

/** A batch of `account` made through the real edge, then finished straight in the database. */
async function finishedBatch(apiKey: string, records: number, finishedAgoMs = 0): Promise<string> {
  const created = await call<Batch>("/v1/batches", { token: apiKey, body: { idempotency_key: `py-${Date.now()}-${records}-${finishedAgoMs}`, input_bytes: 1 } });
  expect(created.status).toBe(201);
  await finishDirectly(created.body.id, records, finishedAgoMs);
  return created.body.id;
}

describe("the Python SDK", () => {
  it("is mypy --strict clean", { timeout: 300_000 }, async () => {
    const result = await runTool(venv.bin("mypy"), ["--strict", "--cache-dir", join(workDir, "mypy-cache"), "src", "tests"], { cwd: PYTHON_SDK_DIR });
    expect(result.code, result.output).toBe(0);
  });

  it("passes its pytest suite against the real stack", { timeout: 600_000 }, async () => {
    const [main, other, limited] = await Promise.all([newAccount(), newAccount(), newAccount()]);
    await withDb((db) => setSettings(db, limited.accountId, { tokens_per_second: 1, max_active_batches: 1 }));
    const expired = await finishedBatch(main.key.secret, 1, LIMITS.bulkDataRetentionMs + 60_000);
    const paged = await finishedBatch(main.key.secret, PAGED_RECORDS);
    const contract = join(workDir, "contract.json");
    writeFileSync(contract, JSON.stringify(contractDump()));
    const trainingFile = join(workDir, "training.jsonl");
    writeFileSync(trainingFile, await noulFile(GROUP_A, animalSentences()));
    // The sizes clients/sdk-python/tests/conftest.py names.
    const imageDir = join(workDir, "images");
    mkdirSync(imageDir);
    writeFileSync(join(imageDir, "photo.jpg"), await photo(320, 240));
    writeFileSync(join(imageDir, "photo.png"), await photo(40, 30, "png"));

    const env = {
      PATH: process.env.PATH ?? "",
      HOME: workDir,
      SVC_BASE_URL: stack().baseUrl,
      SVC_API_KEY: main.key.secret,
      SVC_TEST_OTHER_API_KEY: other.key.secret,
      SVC_TEST_LIMITED_API_KEY: limited.key.secret,
      SVC_TEST_EXPIRED_BATCH_ID: expired,
      SVC_TEST_PAGED_BATCH_ID: paged,
      SVC_TEST_PAGED_RECORDS: String(PAGED_RECORDS),
      SVC_TEST_RELEASE_ID: stack().releaseId,
      SVC_TEST_ACCESS_TOKEN: main.userToken,
      SVC_TEST_TRAINING_FILE: trainingFile,
      SVC_TEST_IMAGE_DIR: imageDir,
      SVC_TEST_CONTRACT: contract,
      SVC_TEST_WEBHOOK_URL: receiver.url,
      SVC_TEST_WEBHOOK_RECEIVED: `http://127.0.0.1:${(received.address() as AddressInfo).port}/`,
      SVC_TEST_SECRETS_LEDGER: stack().ledgerPath,
      PYTHONDONTWRITEBYTECODE: "1",
    };
    const result = await runTool(venv.bin("pytest"), ["-p", "no:cacheprovider", "-rs", "tests"], { cwd: PYTHON_SDK_DIR, env, timeoutMs: 580_000 });
    expect(result.code, result.output).toBe(0);
    // Every test ran: a skip here means the stack's settings did not reach the suite.
    expect(result.output, result.output).not.toMatch(/\d+ skipped/);
  });
});
