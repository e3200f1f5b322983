/**
 * A loopback HTTP server for fakes of faults the real parts cannot show on demand (a hanging or a
 * swapped runtime). The fake's name says what it imitates; this only listens and stops.
 *
 *     const server = await listen((req, res) => res.end("{}"));
 *     await fetch(server.url); await server.stop();
 */
import { createServer, type RequestListener } from "node:http";
import { freePort } from "../../local/ports.ts";

export async function listen(handler: RequestListener): Promise<{ url: string; stop(): Promise<void> }> {
  const server = createServer(handler);
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
