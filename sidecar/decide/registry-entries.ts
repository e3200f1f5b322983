/**
 * The registry entries of the releases the edge resolved, as this sidecar read and checked them
 * (identity.ts `verifiedRelease`), for the real-time routes (sidecar/routes/).
 */
import type { Pool } from "@neondatabase/serverless";
import { ServiceError } from "../../server-shared/errors.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { ResolvedRelease } from "../../server-shared/sidecar-protocol.ts";
import { servedRelease } from "../runtime/registry.ts";
import { verifiedRelease, type Release } from "./identity.ts";

/**
 * The registry entry of a release the edge resolved, read and checked by this sidecar (identity.ts
 * `verifiedRelease`), with the release built from it. Entries are kept by release id with the row
 * revision they were read at; the edge names the revision it read in the same request, so a changed
 * row (address, assignment, retirement) is read again on the next request, and an unchanged one
 * costs no Postgres round trip.
 */
export class RegistryEntries {
  private readonly entries = new Map<string, { entry: RegistryEntry; release: Release }>();
  constructor(private readonly deps: { pool: Pool; selfUrl: string }) {}

  async get(resolved: ResolvedRelease): Promise<{ entry: RegistryEntry; release: Release }> {
    const kept = this.entries.get(resolved.id);
    if (kept && kept.entry.revision === resolved.revision && kept.release.fingerprint === resolved.fingerprint) return kept;
    this.entries.delete(resolved.id);
    const entry = await servedRelease(this.deps.pool, this.deps.selfUrl, resolved.id);
    if (!entry) {
      throw new ServiceError(
        "unavailable",
        "the model service cannot serve this model right now; retry shortly",
        `release ${resolved.id} is not served by this sidecar (${this.deps.selfUrl}): the registry names another sidecar, or none`,
      );
    }
    const read = { entry, release: await verifiedRelease(entry, resolved) };
    this.entries.set(resolved.id, read);
    return read;
  }
}

