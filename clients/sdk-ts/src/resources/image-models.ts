/**
 * `client.imageModels`: the signed-in user's image models (GET /v1/image-models, where the
 * deployment has IMAGE_BROWSER=on): every image training of the account that produced a result, newest
 * first, with its state and the task every decision with it must repeat.
 *
 *     const { data } = await client.imageModels.list();
 *     const ready = data.filter((m) => m.state === "api_ready");
 *     ready[0]?.task;   // { question_id, question, outcome_order }
 *
 * Image models are trained with `client.trainings` (a training file of image assets on `svc-image`).
 */
import type { ImageModelList } from "../../../../contract/image-models.ts";
import { withRequestId, type RequestOptions, type Transport, type WithRequestId } from "../core.ts";

export class ImageModels {
  constructor(private readonly transport: Transport) {}

  /**
   * The account's image models, newest first: `training_passed` (accepted, not served yet),
   * `api_ready` (decisions may use its `id`) or `rejected` (kept with its report; its `id` is null),
   * each with its saved task and held-out figures. Takes the signed-in user's access token (the
   * client's `accessToken`; a client without one throws ConfigurationError before anything is sent).
   *
   *     const { data } = await client.imageModels.list();
   *     data.map((m) => [m.id, m.state, m.evaluation?.accuracy]);
   */
  async list(options?: RequestOptions): Promise<WithRequestId<ImageModelList>> {
    return withRequestId(await this.transport.request<ImageModelList>({ method: "GET", path: "/v1/image-models", auth: "access_token" }, options));
  }
}
