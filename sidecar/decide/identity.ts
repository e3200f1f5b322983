/**
 * The one release check (runs in the sidecar): which release an execution runs on, and which runtime
 * identity every runtime response must then carry. Real-time (app.ts) and bulk (bulk/records.ts)
 * both go through `verifiedRelease`; execute.ts wraps every runtime client in `verifiedClient`.
 *
 *     const release = await verifiedRelease(entry, { id, fingerprint });  // the registry row, checked
 *     const client = verifiedClient(http, release.runtime);                // every response's stamp checked
 *
 * A release is what the registry names: its id and fingerprint, the identity its runtime reports (its
 * own, or a calibrated release's base's) and its calibration. A calibrated release's fingerprint is
 * derived from its base's and its parameters, so a row edited by hand is refused rather than served.
 */
import type { Calibration } from "../../contract/calibration.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { calibratedFingerprint, type RegistryEntry } from "../../server-shared/registry.ts";
import { trainedFingerprint, type SavedTask, type TrainedHeads } from "../../server-shared/trained.ts";
import type { Stamp } from "../../server-shared/runtime-protocol.ts";
import type { RuntimeClient } from "../runtime/client.ts";

/** A runtime identity: the release id and fingerprint a runtime reports. */
export interface RuntimeIdentity {
  id: string;
  fingerprint: string;
}

export interface Release extends RuntimeIdentity {
  /** What the runtime must report; the release itself when absent (a calibrated release names its base's runtime). */
  runtime?: RuntimeIdentity;
  /** The release's calibration; none (the identity) when absent. */
  calibration?: Calibration;
  /** A trained release's saved task and heads: its answers are the heads' (execute.ts). */
  trained?: { task: SavedTask; heads: TrainedHeads };
}

/**
 * A runtime named another release or fingerprint than the one this execution was admitted for (a
 * misrouted or swapped runtime), or a registry row does not add up. The caller sees 503 with no
 * answer; the operator note says what differed.
 */
export class IdentityMismatchError extends ServiceError {
  override readonly name = "IdentityMismatchError";
  constructor(
    /** The identity that was expected. */
    readonly release: RuntimeIdentity,
    /** What the runtime (or the registry row) said. */
    readonly actual: Stamp,
  ) {
    super(
      "identity_mismatch",
      "the model runtime does not serve the registered release; no answer was produced",
      `identity mismatch, refusing release ${release.id}: runtime reported ${actual.release_id} (fingerprint ${actual.fingerprint.slice(0, 12)}), ` +
        `expected ${release.id} (fingerprint ${release.fingerprint.slice(0, 12)})`,
    );
  }
}

/**
 * The release `expected` names (the edge's resolution, or the one a batch froze at submit), built
 * from its registry entry once the entry is shown to be that release: the same fingerprint, and for
 * a calibrated release one that covers its base and its parameters, for a trained release one that
 * covers its base, its task and its heads. Throws IdentityMismatchError.
 */
export async function verifiedRelease(entry: RegistryEntry, expected: RuntimeIdentity): Promise<Release & { runtime: RuntimeIdentity }> {
  if (entry.id !== expected.id || entry.fingerprint !== expected.fingerprint) {
    throw new IdentityMismatchError(expected, { release_id: entry.id, fingerprint: entry.fingerprint });
  }
  const trained = entry.task && entry.head ? { task: entry.task, heads: entry.head } : null;
  // A row with half of a trained release, or both a calibration and heads, is not a release this code made.
  const derived =
    (entry.task === null) !== (entry.head === null) || (trained && entry.calibration)
      ? "inconsistent"
      : trained
        ? await trainedFingerprint(entry.runtime_fingerprint, trained.task, trained.heads)
        : entry.calibration
          ? await calibratedFingerprint(entry.runtime_fingerprint, entry.calibration)
          : entry.runtime_fingerprint;
  if (derived !== entry.fingerprint) throw new IdentityMismatchError(expected, { release_id: entry.id, fingerprint: derived });
  return {
    id: entry.id,
    fingerprint: entry.fingerprint,
    runtime: { id: entry.runtime_release, fingerprint: entry.runtime_fingerprint },
    ...(entry.calibration ? { calibration: entry.calibration } : {}),
    ...(trained ? { trained } : {}),
  };
}

/** The runtime identity a release's responses must carry. */
export const runtimeOf = (release: Release): RuntimeIdentity => release.runtime ?? { id: release.id, fingerprint: release.fingerprint };

/** `response`, when it names `runtime`; IdentityMismatchError otherwise. */
export function checkStamp<T extends Stamp>(runtime: RuntimeIdentity, response: T): T {
  if (response.release_id !== runtime.id || response.fingerprint !== runtime.fingerprint) throw new IdentityMismatchError(runtime, response);
  return response;
}

/** `client`, refusing with IdentityMismatchError every response that names another runtime identity than `runtime`. */
export function verifiedClient(client: RuntimeClient, runtime: RuntimeIdentity): RuntimeClient {
  const check = <T extends Stamp>(response: T): T => checkStamp(runtime, response);
  return {
    identity: async (signal) => check(await client.identity(signal)),
    tokenize: async (request, signal) => check(await client.tokenize(request, signal)),
    score: async (request, signal) => check(await client.score(request, signal)),
    scoreGroup: async (request, signal) => check(await client.scoreGroup(request, signal)),
    embed: async (request, signal) => check(await client.embed(request, signal)),
  };
}
