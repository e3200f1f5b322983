/**
 * Label strings to token ids (runs in the sidecar, under Bun on the GPU host). The rendering offers
 * answers as labels ("Yes"/"No", "0".."9", "A".."Z"); the runtime scores token ids, so each label must
 * be exactly one token of the served model that decodes back to the label, and no two labels of one
 * set may share a token. A model that fails this cannot be used with this rendering at all.
 *
 *     const labels = labelCache.get(release.fingerprint) ?? (await resolveLabels(client));
 *     labelTokens(labels, pass.labels); // [236776, 236799, ...]
 */
import { CHOICE_LABELS, NOUL_LABELS, SCORE_LABELS } from "./render.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import type { RuntimeClient } from "../runtime/client.ts";

/** Every label of the rendering -> its token id on one model. */
export type ResolvedLabels = ReadonlyMap<string, number>;

const LABEL_SETS: Record<string, readonly string[]> = { noul: NOUL_LABELS, score: SCORE_LABELS, choice: CHOICE_LABELS };

/**
 * Label tokens per runtime fingerprint. A fingerprint covers the weights, the adapter and the
 * rendering version, so its labels never change. Filled by the executor only once a pass has proved
 * that the runtime really serves that fingerprint, so a misrouted runtime cannot poison it.
 */
export const labelCache = new Map<string, ResolvedLabels>();

/**
 * The model cannot be used with this rendering (a label is not a single self-decoding token, or two
 * labels share one). The caller sees 503; the operator note names labels, never customer text.
 */
export class LabelError extends ServiceError {
  override readonly name = "LabelError";
  constructor(readonly problem: string) {
    super("unavailable", "the model cannot answer this question type", `release cannot be used with this rendering: ${problem}`);
  }
}

/** Tokenizes every label of the rendering on `client` and checks each set; throws LabelError. */
export async function resolveLabels(client: RuntimeClient, signal?: AbortSignal): Promise<ResolvedLabels> {
  const resolved = new Map<string, number>();
  for (const [set, labels] of Object.entries(LABEL_SETS)) {
    // Tokenize calls are cheap and the runtime answers them without waiting for the GPU.
    const tokenized = await Promise.all(labels.map((text) => client.tokenize({ text, special: false }, signal)));
    const owner = new Map<number, string>();
    labels.forEach((label, i) => {
      const { tokens, pieces } = tokenized[i]!;
      if (tokens.length !== 1 || pieces[0] !== label) {
        throw new LabelError(`${set} label ${JSON.stringify(label)} is ${tokens.length} token(s) decoding to ${JSON.stringify(pieces.join(""))}, not one token`);
      }
      const token = tokens[0]!;
      const other = owner.get(token);
      if (other !== undefined) throw new LabelError(`${set} labels ${JSON.stringify(other)} and ${JSON.stringify(label)} share token ${token}`);
      owner.set(token, label);
      resolved.set(label, token);
    });
  }
  return resolved;
}

/** The token ids of a pass's labels, in the pass's order. */
export function labelTokens(resolved: ResolvedLabels, labels: readonly string[]): number[] {
  return labels.map((label) => {
    const token = resolved.get(label);
    if (token === undefined) throw new LabelError(`label ${JSON.stringify(label)} was not resolved`);
    return token;
  });
}
