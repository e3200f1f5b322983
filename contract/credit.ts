/**
 * Prepaid credit for image decisions: the published price, written once and imported by
 * the edge (which reserves and settles), the sidecar, the operator's tools and the SDKs. Text
 * decisions are not charged.
 *
 * An image decision reserves its worst case before any GPU work, settles once on success (charging
 * what it actually used and giving the rest of the reservation back) and releases the reservation on
 * failure; an account whose credit cannot cover the worst case is refused with 402.
 *
 *     creditFor(64 + textTokensOf(stateAndQuestionJson));  // micro-USD for one 256 x 256 read: 64 visual tokens
 *
 * `CreditBalance` is the account's credit as a GET route will show it.
 *
 * Amounts are integers of micro-USD (one millionth of a US dollar), so no sum is ever rounded.
 */
import { z } from "zod";

/**
 * $2 per million billable tokens. A billable token of an image decision is either a visual token the
 * runtime processed (one cell of the backbone's feature map, runtime/image-main.ts) or one of the
 * text tokens of one canonical copy of the decision's state and question: one token per 4 UTF-8 bytes
 * of their canonical JSON, rounded up (`textTokensOf`). Nothing else is billed: not the asset's id or
 * filename, not routing, not the wrappers a rendering adds.
 */
export const IMAGE_PRICING = { currency: "USD", micro_usd_per_billable_token: 2 } as const;

/** Micro-USD charged for `billableTokens` (a non-negative integer). */
export function creditFor(billableTokens: number): number {
  if (!Number.isSafeInteger(billableTokens) || billableTokens < 0) throw new RangeError(`billable tokens must be a non-negative integer, got ${billableTokens}`);
  return billableTokens * IMAGE_PRICING.micro_usd_per_billable_token;
}

const encoder = new TextEncoder();

/** Billable text tokens of the canonical JSON of a decision's state and question: ceil(UTF-8 bytes / 4). */
export function textTokensOf(stateAndQuestionJson: string): number {
  return Math.ceil(encoder.encode(stateAndQuestionJson).length / 4);
}

const MicroUsd = z.number().int().nonnegative();

/** An account's credit as the wire shows it. */
export const CreditBalance = z.object({
  object: z.literal("credit_balance"),
  /** What new reservations may take now: granted credit less what was charged and what is reserved. */
  balance_micro_usd: MicroUsd,
  /** Held by image decisions in flight; given back, in whole or in part, when each ends. */
  reserved_micro_usd: MicroUsd,
  pricing: z.object({ currency: z.literal(IMAGE_PRICING.currency), micro_usd_per_billable_token: z.number().int().positive() }),
});
export type CreditBalance = z.infer<typeof CreditBalance>;
