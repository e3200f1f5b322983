/**
 * A batch's input file as bytes: JSONL written from records, a JSONL file read from a path, or bytes
 * given as they are. Records get the client's default model where they name none, as real-time
 * requests do; a file or bytes are sent unchanged. The bounds the service publishes on every batch
 * (LIMITS.bulkFileBytes, LIMITS.bulkFileRecords) are checked here so a file that cannot be accepted
 * is refused before anything is uploaded; everything else is the service's to check.
 *
 *     await encodeInput([{ custom_id: "t-1", body: { state: "...", questions: { q: noul("?") } } }], "svc-shared");
 */
import { readFile } from "node:fs/promises";
import { stringifyJson } from "../../../contract/json.ts";
import { LIMITS } from "../../../contract/limits.ts";
import type { DecisionRequest } from "./decisions.ts";
import { InputError } from "./errors.ts";

/** One line of a batch's input: `custom_id` unique in the file, `body` a decision request. */
export interface InputRecord {
  custom_id: string;
  body: DecisionRequest;
}

/** Records, the path of a JSONL file, or the file's bytes. */
export type BatchInput = readonly InputRecord[] | string | Uint8Array;

export async function encodeInput(input: BatchInput, defaultModel: string): Promise<Uint8Array> {
  let bytes: Uint8Array;
  if (typeof input === "string") {
    try {
      bytes = await readFile(input);
    } catch (err) {
      throw new InputError(`cannot read the batch file ${input}: ${(err as Error).message}`, { cause: err });
    }
  } else if (input instanceof Uint8Array) {
    bytes = input;
  } else if (Array.isArray(input)) {
    bytes = encodeRecords(input, defaultModel);
  } else {
    throw new InputError("a batch input is an array of {custom_id, body} records, the path of a JSONL file, or a Uint8Array");
  }
  if (bytes.byteLength === 0) throw new InputError("the batch file is empty");
  if (bytes.byteLength > LIMITS.bulkFileBytes) {
    throw new InputError(`the batch file is ${bytes.byteLength} bytes; a batch holds at most ${LIMITS.bulkFileBytes} bytes`);
  }
  return bytes;
}

function encodeRecords(records: readonly InputRecord[], defaultModel: string): Uint8Array {
  if (records.length === 0) throw new InputError("the batch has no records");
  if (records.length > LIMITS.bulkFileRecords) {
    throw new InputError(`${records.length} records; a batch holds at most ${LIMITS.bulkFileRecords}`);
  }
  const lines = records.map((record) => {
    if (record === null || typeof record !== "object" || !("custom_id" in record) || !("body" in record)) {
      throw new InputError("each batch record is an object with custom_id and body");
    }
    const { custom_id, body, ...rest } = record;
    return stringifyJson({ custom_id, body: { ...body, model: body.model ?? defaultModel }, ...rest });
  });
  return new TextEncoder().encode(lines.join("\n") + "\n");
}
