/** The one body reader, driven with real Requests: streamed limits, strict UTF-8, errors that stay short. */
import { describe, expect, it } from "vitest";
import { readText } from "./body.ts";
import { ServiceError } from "./errors.ts";

/** A request whose body arrives in the given pieces, with no Content-Length; counts the pieces read. */
function streamed(pieces: Uint8Array[]): { request: Request; pulled: () => number } {
  let next = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (next === pieces.length) return controller.close();
      controller.enqueue(pieces[next++]!);
    },
  });
  return { request: new Request("http://127.0.0.1/", { method: "POST", body, duplex: "half" } as RequestInit), pulled: () => next };
}

async function refusal(run: Promise<unknown>): Promise<string> {
  const err = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  expect((err as ServiceError).status).toBe(422);
  return (err as ServiceError).message;
}

describe("readText", () => {
  it("stops reading at the limit, without a Content-Length to go by", async () => {
    const piece = new Uint8Array(1024).fill(0x61);
    const { request, pulled } = streamed(Array.from({ length: 100 }, () => piece));
    expect(await refusal(readText(request, 4096))).toBe("request body is larger than 4096 bytes");
    expect(pulled()).toBeLessThanOrEqual(6);
  });

  it("refuses a declared Content-Length over the limit before reading anything", async () => {
    const request = new Request("http://127.0.0.1/", { method: "POST", body: "x".repeat(10), headers: { "content-length": "999999" } });
    expect(await refusal(readText(request, 100))).toMatch(/larger than 100 bytes/);
  });

  it("reads UTF-8 split across pieces, and refuses bytes that are not UTF-8 wherever they fall", async () => {
    const euro = new TextEncoder().encode("€"); // three bytes
    const split = streamed([euro.slice(0, 1), euro.slice(1), new TextEncoder().encode("!")]);
    expect(await readText(split.request, 100)).toBe("€!");
    for (const pieces of [[new Uint8Array([0x61, 0xff])], [euro.slice(0, 2)], [new Uint8Array([0xed, 0xa0, 0x80])]]) {
      expect(await refusal(readText(streamed(pieces).request, 100))).toBe("request body is not valid UTF-8");
    }
  });
});
