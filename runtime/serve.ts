/**
 * How a runtime process serves (runs in the runtime, text or image, on the GPU host): listen, announce
 * itself on stdout for whoever started it, stop cleanly on SIGTERM or SIGINT (stop listening, let the
 * passes already sent finish, then free the engine), and read its secret file again on SIGHUP.
 *
 *     serveRuntime({ label: "runtime", hostname, port, fetch: app.fetch, identity, secrets, dispose: () => engine.dispose() });
 *     // stdout: RUNTIME READY {"port":8090,"release_id":"local-…","fingerprint":"…"}
 */
import type { Identity } from "../server-shared/runtime-protocol.ts";
import type { SecretSource } from "../server-shared/secrets.ts";

export function serveRuntime(opts: {
  /** How its log lines begin: "runtime" or "image runtime". */
  label: string;
  hostname: string;
  port: number;
  fetch: (request: Request) => Response | Promise<Response>;
  identity: Identity;
  secrets: SecretSource;
  dispose: () => Promise<void>;
}): void {
  const server = Bun.serve({ hostname: opts.hostname, port: opts.port, fetch: opts.fetch });
  const shutdown = async () => {
    await server.stop();
    await opts.dispose();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown());
  process.once("SIGINT", () => void shutdown());
  process.on("SIGHUP", () => {
    const failed = opts.secrets.reload();
    console.error(failed.length === 0 ? `${opts.label}: secrets read again` : `${opts.label}: could not read ${failed.join(", ")} again; kept the previous value`);
  });
  console.log(`RUNTIME READY ${JSON.stringify({ port: server.port, release_id: opts.identity.release_id, fingerprint: opts.identity.fingerprint })}`);
}
