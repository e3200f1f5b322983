/**
 * `client.imageDecisions`: a decision about one photo by a trained image model, from a signed-in
 * session (POST /v1/image-decisions, where the deployment has IMAGE_BROWSER=on). The body and the
 * answer are those of `client.systemOne`, which makes the same decision with the API key where
 * IMAGE_API is on:
 *
 *     const reply = await client.imageDecisions.create({
 *       model: "ft:svc-image:0f3c...",
 *       state: "",
 *       // Exactly the question the model was trained on: its `task` in client.imageModels.list().
 *       questions: { shape: choice(["circle", "square", "triangle"], "Which shape is drawn?") },
 *       images: [{ asset_id: asset.id }],
 *     });
 *     reply.answers.shape.choice;                 // "circle" | "square" | "triangle"
 *     reply.answers.shape.unknown_probability;    // the mass on "none of them"
 *
 * Each decision is paid from the account's prepaid credit (`client.imageCredit`): the service
 * reserves its worst case before any GPU work (PaymentRequiredError, 402, when the credit cannot
 * cover it) and charges what it used.
 */
import { stringifyJson } from "../../../../contract/json.ts";
import { withRequestId, type RequestOptions, type Transport, type WithRequestId } from "../core.ts";
import type { DecisionRequest, DecisionResponse, Questions } from "../decisions.ts";

/** An image decision: a decision request whose `images` names one ready image asset. */
export type ImageDecisionRequest<Q extends Questions = Questions> = DecisionRequest<Q> & { images: ReadonlyArray<{ asset_id: string }> };

export class ImageDecisions {
  constructor(
    private readonly transport: Transport,
    private readonly defaultModel: () => string,
  ) {}

  /**
   * Classifies one photo with an image model (`request.model`, else the client's `defaultModel`),
   * with the signed-in user's access token (the client's `accessToken`; a client without one throws
   * ConfigurationError before anything is sent). The question must be the model's saved question,
   * its answers in the saved order (UnprocessableEntityError `task_mismatch` says what differs); an
   * unknown model or asset is a NotFoundError, too little credit a PaymentRequiredError. Retried
   * only after 429 and 529, as decisions are.
   *
   *     const reply = await client.imageDecisions.create({ model, state: "", questions, images: [{ asset_id }] });
   *     const { choice, probabilities, unknown_probability } = reply.answers.shape;
   */
  async create<const Q extends Questions>(request: ImageDecisionRequest<Q>, options?: RequestOptions): Promise<WithRequestId<DecisionResponse<Q>>> {
    // Written with stringifyJson so a Map (the answers' outcome order, which must be the model's) keeps its order.
    const body = stringifyJson({ ...request, model: request.model ?? this.defaultModel() });
    return withRequestId(await this.transport.request<DecisionResponse<Q>>({ method: "POST", path: "/v1/image-decisions", auth: "access_token", body }, options));
  }
}
