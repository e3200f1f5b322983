/**
 * Run under Bun by sidecar/webhooks.test.ts: a TLS receiver on 127.0.0.1 with a certificate for
 * `hooks.test` (the paths in argv), and one webhook request pinned (sidecar/webhooks.ts `pinned`) to
 * 127.0.0.1 for `https://hooks.test:<port>/in` and one for `https://elsewhere.test:<port>/in`.
 * Prints what each got: the receiver's view of the Host header, or the error.
 */
import { pinned } from "../../sidecar/webhooks.ts";

const [certPath, keyPath] = process.argv.slice(2) as [string, string];
const cert = await Bun.file(certPath).text();
const server = Bun.serve({ port: 0, hostname: "127.0.0.1", tls: { cert, key: await Bun.file(keyPath).text() }, fetch: (req) => new Response(req.headers.get("host") ?? "") });
const port = server.port;
const outcomes: Record<string, string> = {};
for (const name of ["hooks.test", "elsewhere.test"]) {
  const request = pinned(new URL(`https://${name}:${port}/in`), "127.0.0.1");
  try {
    const res = await fetch(request.target, { method: "POST", body: "{}", ...request.tls, tls: { ...request.tls.tls!, ca: cert }, headers: request.host });
    outcomes[name] = `${res.status} ${await res.text()}`;
  } catch (err) {
    outcomes[name] = `error ${(err as { code?: string }).code ?? (err as Error).message}`;
  }
}
server.stop(true);
console.log(JSON.stringify({ port, outcomes }));
