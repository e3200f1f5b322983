/**
 * A release's calibration and its published report (`GET /v1/models/{model}/calibration`, and
 * `.../calibration.svg` for the reliability diagram). A calibrated release is a new release: its
 * fingerprint covers its base release's fingerprint and these parameters, and the base is kept.
 *
 * Parameters per answer type, null where the type is not calibrated:
 *   - noul: Platt scaling of p(yes), `σ(slope · logit(p) + bias)`;
 *   - choice and score: a temperature T over the distribution, `p_i ∝ p_i^(1/T)`.
 */
import { z } from "zod";
import { fields } from "./fields.ts";

const Finite = z.number().finite();
const Unit = z.number().min(0).max(1);

export const Calibration = fields({
  noul: fields({ slope: Finite, bias: Finite }).nullable(),
  choice: fields({ temperature: z.number().min(0.01).max(100) }).nullable(),
  score: fields({ temperature: z.number().min(0.01).max(100) }).nullable(),
});
export type Calibration = z.infer<typeof Calibration>;

export const QUESTION_TYPES = ["noul", "choice", "score"] as const;
export type QuestionType = (typeof QUESTION_TYPES)[number];

/** Figures of a set of labelled answers. */
export const Figures = fields({
  items: z.number().int().nonnegative(),
  /** Share of answers whose most probable label is the true one (noul: p(yes) > 0.5 for true). */
  accuracy: Unit,
  /** Area under the ROC curve of p(yes); noul only. */
  auroc: Unit.nullable(),
  /** Expected calibration error, 10 equal-width bins (noul: over p(yes); otherwise over the top probability). */
  ece: Unit,
  /** Brier score (noul: mean (p − y)²; otherwise Σ over options, so between 0 and 2). */
  brier: z.number().min(0).max(2),
  /** Mean share of next-token probability on the offered labels. */
  option_mass: Unit,
});
export type Figures = z.infer<typeof Figures>;

export const ReliabilityBin = fields({
  lower: Unit,
  upper: Unit,
  count: z.number().int().nonnegative(),
  mean_confidence: Unit.nullable(),
  accuracy: Unit.nullable(),
});
export type ReliabilityBin = z.infer<typeof ReliabilityBin>;

export const TypeEvaluation = fields({
  before: Figures,
  after: Figures,
  reliability_before: z.array(ReliabilityBin),
  reliability_after: z.array(ReliabilityBin),
});
export type TypeEvaluation = z.infer<typeof TypeEvaluation>;

export const CalibrationReport = fields({
  release: z.string(),
  base_release: z.string(),
  fitted_at: z.string(),
  parameters: Calibration,
  data: fields({
    /** The labelled file's name (no directory) and SHA-256. */
    file: z.string(),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    /** Items per type the parameters were fitted on, and the held-out items the figures are measured on. */
    fitting_items: z.record(z.enum(QUESTION_TYPES), z.number().int().nonnegative()),
    evaluation_items: z.record(z.enum(QUESTION_TYPES), z.number().int().nonnegative()),
  }),
  /** Held-out figures before and after calibration, per type present in the data. */
  evaluation: fields({ noul: TypeEvaluation.optional(), choice: TypeEvaluation.optional(), score: TypeEvaluation.optional() }),
});
export type CalibrationReport = z.infer<typeof CalibrationReport>;
