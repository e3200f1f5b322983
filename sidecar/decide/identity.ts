/**
 * Which runtime an execution expects, and the error when a runtime's response names another (runs in
 * the sidecar). Every tokenize and score response carries a stamp (server-shared/runtime-protocol.ts);
 * admission.ts and execute.ts compare each one with the registry's runtime identity.
 */
import { ServiceError } from "../../server-shared/errors.ts";

/** A runtime identity: the release id and fingerprint a runtime reports. */
export interface RuntimeIdentity {
  id: string;
  fingerprint: string;
}

/**
 * A runtime named another release or fingerprint than the one this execution was admitted for (a
 * misrouted or swapped runtime). The caller sees 503 with no answer; the operator note says what
 * differed.
 */
export class IdentityMismatchError extends ServiceError {
  override readonly name = "IdentityMismatchError";
  constructor(
    /** The runtime identity the execution was admitted for. */
    readonly release: RuntimeIdentity,
    /** What the runtime said it computed with. */
    readonly actual: { release_id: string; fingerprint: string },
  ) {
    super(
      "identity_mismatch",
      "the model runtime does not serve the registered release; no answer was produced",
      `refusing release ${release.id}: runtime reported ${actual.release_id} (fingerprint ${actual.fingerprint.slice(0, 12)}), ` +
        `expected ${release.id} (fingerprint ${release.fingerprint.slice(0, 12)})`,
    );
  }
}
