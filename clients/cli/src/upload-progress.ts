/**
 * A fetch for the SDK client that reports how much of an upload has been sent (runs in a user's
 * terminal). The SDK sends a batch's input as one byte array; this fetch hands it over in 64 KiB
 * chunks, with its exact Content-Length (the signed destination requires one), and reports each
 * chunk as the connection takes it. Every other request passes through unchanged.
 *
 *     const client = ctx.client({ fetch: uploadProgressFetch((sent, total) => bar.update(sent / total, "")) });
 */
const CHUNK_BYTES = 64 * 1024;

export function uploadProgressFetch(onProgress: (sent: number, total: number) => void): typeof fetch {
  const progressFetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const body = init?.body;
    if (init?.method !== "PUT" || !(body instanceof Uint8Array)) return fetch(input, init);
    const total = body.byteLength;
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= total) {
          controller.close();
          return;
        }
        const end = Math.min(sent + CHUNK_BYTES, total);
        controller.enqueue(body.subarray(sent, end));
        sent = end;
        onProgress(sent, total);
      },
    });
    const headers = new Headers(init.headers);
    headers.set("content-length", String(total));
    onProgress(0, total);
    return fetch(input, { ...init, headers, body: stream, duplex: "half" } as RequestInit);
  };
  return progressFetch as typeof fetch;
}
