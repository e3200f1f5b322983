/**
 * A shared secret setting's value as a rotation list (edge, sidecar and runtime; fs-free, so the edge
 * bundles it): `new,old` while a secret is being rotated. The first is the one a tier sends; every
 * one is accepted. server-shared/secrets.ts reads the GPU host's from files; docs/deploy.md gives
 * the rotation steps.
 *
 *     parseSecretList("new,old"); // { send: "new", accepted: ["new", "old"] }
 */

export interface SecretList {
  /** The secret this tier presents. */
  send: string;
  /** Every secret this tier accepts (`send` first). */
  accepted: readonly string[];
}

/** Parses `new,old` (surrounding blanks and a trailing newline ignored); throws on an empty list or entry. */
export function parseSecretList(raw: string): SecretList {
  const accepted = raw.trim().split(",").map((secret) => secret.trim());
  if (accepted.some((secret) => secret === "")) throw new Error("is empty or has an empty entry in its comma-separated list");
  return { send: accepted[0]!, accepted };
}
