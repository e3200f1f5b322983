/**
 * Wakes sidecars' job workers (runs in workerd and under Bun): POST /internal/jobs/wake to each
 * sidecar named, with the sidecar secret, all at once. A worker that is idle then looks for work at
 * once instead of at its next poll (sidecar/jobs/worker.ts, JOB_TIMING.idleMs later). Only a hint:
 * a wake that fails costs that wait and nothing else, so failures are logged and never thrown.
 *
 * The callers: the edge when a job is submitted (the sidecars the registry names, up to LIMITS.wakeSidecars, edge/wake.ts), and
 * the sidecar that validated a batch, for the other sidecars that serve its records (sidecar/bulk/steps.ts).
 *
 *     await wakeSidecars(["https://gpu-1.example.com"], secret, (line) => console.error(`edge: ${line}`));
 */
import { checkServiceUrl } from "../contract/urls.ts";
import { loggable } from "./errors.ts";
import { SIDECAR_PATHS } from "./sidecar-protocol.ts";

/** How long one wake may take before it is given up. */
const WAKE_TIMEOUT_MS = 5000;

export async function wakeSidecars(sidecarUrls: readonly string[], secret: string, log: (line: string) => void): Promise<void> {
  await Promise.all(
    [...new Set(sidecarUrls)].map(async (sidecarUrl) => {
      try {
        const res = await fetch(new URL(SIDECAR_PATHS.wakeJobs, checkServiceUrl(sidecarUrl, "sidecar")), {
          method: "POST",
          headers: { authorization: `Bearer ${secret}` },
          redirect: "manual",
          signal: AbortSignal.timeout(WAKE_TIMEOUT_MS),
        });
        await res.body?.cancel();
        if (res.status !== 204) log(`waking the job workers of ${sidecarUrl}: HTTP ${res.status}`);
      } catch (err) {
        log(`waking the job workers of ${sidecarUrl}: ${loggable(err)}`);
      }
    }),
  );
}
