/**
 * The sidecar as tests and benchmarks start it: `bun test/support/sidecar-main.ts`, the production
 * sidecar (sidecar/start.ts `runSidecar`) with what its environment's SVC_TEST_* settings change:
 * shorter periods than the specification's, a fault, a benchmark's baseline. local/tiers.ts starts
 * this entry instead of sidecar/main.ts when any SVC_TEST_* setting is given; production never does.
 *
 *   SVC_TEST_JOB_LEASE_MS, SVC_TEST_JOB_RENEW_MS   the job workers' lease and its renewal period
 *   SVC_TEST_JOB_IDLE_MS            how long an idle job worker waits before it looks for work again, unless woken
 *   SVC_TEST_CLEANUP_EVERY_MS       how often retention cleanup runs
 *   SVC_TEST_DATA_RETENTION_MS, SVC_TEST_METADATA_RETENTION_MS   a batch's data and metadata retention
 *   SVC_TEST_WEBHOOK_LEASE_MS       how long a webhook attempt holds its delivery (the attempt ends by half of it)
 *   SVC_TEST_BULK_CLAIM_RECORDS     every bulk claim takes this many records, whatever the passes take
 *   SVC_TEST_IMAGE_HOLD_MS          image preprocessing waits this long after writing its result
 *   SVC_TEST_CRASH_AFTER_IMAGE_ANSWER "on": the process kills itself right after handing over an image
 *                                   decision's answer, the crash a settlement must survive
 *   SVC_TEST_SHARED_WORK            "off": every pass evaluated in full and no content-free reading kept
 *                                   (decide/steps.ts `Steps.shared`), the shared-work benchmark's baseline
 */
import { z } from "zod";
import { LIMITS } from "../../contract/limits.ts";
import { flag, optionalInteger, parseSettings } from "../../server-shared/settings.ts";
import { fixedClaimSize } from "../../sidecar/bulk/claim-size.ts";
import { SERVED_STEPS } from "../../sidecar/decide/steps.ts";
import { runSidecar, type SidecarTuning } from "../../sidecar/start.ts";
import { WEBHOOK_LEASE_MS } from "../../sidecar/webhooks.ts";

export const TestSettings = z.object({
  SVC_TEST_JOB_LEASE_MS: optionalInteger(100, LIMITS.jobLeaseMs),
  SVC_TEST_JOB_RENEW_MS: optionalInteger(50, LIMITS.jobLeaseRenewMs),
  SVC_TEST_JOB_IDLE_MS: optionalInteger(1, 3_600_000),
  SVC_TEST_CLEANUP_EVERY_MS: optionalInteger(100, LIMITS.cleanupIntervalMs),
  SVC_TEST_DATA_RETENTION_MS: optionalInteger(0, LIMITS.bulkDataRetentionMs),
  SVC_TEST_METADATA_RETENTION_MS: optionalInteger(0, LIMITS.batchMetadataRetentionMs),
  SVC_TEST_WEBHOOK_LEASE_MS: optionalInteger(100, WEBHOOK_LEASE_MS),
  SVC_TEST_BULK_CLAIM_RECORDS: optionalInteger(1, LIMITS.bulkClaimRecords),
  SVC_TEST_IMAGE_HOLD_MS: optionalInteger(0, 60_000),
  SVC_TEST_CRASH_AFTER_IMAGE_ANSWER: flag("off"),
  SVC_TEST_SHARED_WORK: flag("on"),
});
export type TestSettings = z.infer<typeof TestSettings>;

/** What the SVC_TEST_* settings change, as the tuning runSidecar takes. */
export function tuningOf(test: TestSettings): SidecarTuning {
  const defined = <T extends object>(value: T) => Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
  return {
    jobTiming: defined({ leaseMs: test.SVC_TEST_JOB_LEASE_MS, renewMs: test.SVC_TEST_JOB_RENEW_MS, idleMs: test.SVC_TEST_JOB_IDLE_MS }),
    sweeperTiming: defined({
      cleanupEveryMs: test.SVC_TEST_CLEANUP_EVERY_MS,
      retention:
        test.SVC_TEST_DATA_RETENTION_MS === undefined && test.SVC_TEST_METADATA_RETENTION_MS === undefined
          ? undefined
          : {
              dataMs: test.SVC_TEST_DATA_RETENTION_MS ?? LIMITS.bulkDataRetentionMs,
              metadataMs: test.SVC_TEST_METADATA_RETENTION_MS ?? LIMITS.batchMetadataRetentionMs,
            },
    }),
    ...defined({
      webhookLeaseMs: test.SVC_TEST_WEBHOOK_LEASE_MS,
      imageHoldMs: test.SVC_TEST_IMAGE_HOLD_MS,
      claimSize: test.SVC_TEST_BULK_CLAIM_RECORDS === undefined ? undefined : fixedClaimSize(test.SVC_TEST_BULK_CLAIM_RECORDS),
      // Long enough for the answer to leave, too short for anything else to happen.
      afterImageAnswer: test.SVC_TEST_CRASH_AFTER_IMAGE_ANSWER === "on" ? () => setTimeout(() => process.kill(process.pid, "SIGKILL"), 100) : undefined,
      steps: test.SVC_TEST_SHARED_WORK === "off" ? { ...SERVED_STEPS, shared: false } : undefined,
    }),
  };
}

if (import.meta.main) {
  let test: TestSettings;
  try {
    test = parseSettings("sidecar", TestSettings, process.env);
  } catch (err) {
    console.error(`${(err as Error).message}; refusing to start`);
    process.exit(2);
  }
  runSidecar(tuningOf(test));
}
