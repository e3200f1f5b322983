/**
 * `client.models`: the models this account may use, each a release with its aliases, and the
 * account's trained models (`client.trainings` makes them): their evaluation reports, and retiring one.
 *
 *     const { models } = await client.models.list();
 *     models.map((m) => [m.name, ...m.aliases]);
 */
import type { ModelList, RetiredModel } from "../../../../contract/models.ts";
import type { EvaluationReport } from "../../../../contract/trainings.ts";
import { type RequestOptions, type Transport, type WithRequestId, withRequestId } from "../core.ts";
import { InputError } from "../errors.ts";

export class Models {
  constructor(private readonly transport: Transport) {}

  /**
   * Every serving release the account may use (shared ones and its own, trained ones with the path
   * of their `evaluation` report), newest first, with the aliases that name it.
   *
   *     const { models } = await client.models.list();
   *     console.log(models[0]?.name, models[0]?.aliases);
   */
  async list(options?: RequestOptions): Promise<WithRequestId<ModelList>> {
    return withRequestId(await this.transport.request<ModelList>({ method: "GET", path: "/v1/models" }, options));
  }

  /**
   * The evaluation report one of the account's trained models was accepted with (the `evaluation`
   * path of its listing), with the API key; a NotFoundError for any other model.
   *
   *     const report = await client.models.evaluation("ft:svc-shared:0f3c...");
   *     report.questions[0]?.candidate.primary;   // beside report.questions[0]?.zero_shot.primary
   */
  async evaluation(model: string, options?: RequestOptions): Promise<WithRequestId<EvaluationReport>> {
    return withRequestId(await this.transport.request<EvaluationReport>({ method: "GET", path: `${modelPath(model)}/evaluation` }, options));
  }

  /**
   * Retires a model the account trained: new requests for it answer 404, as for an unknown model.
   * Like training, it takes the signed-in user's access token (the client's `accessToken`), not the
   * API key; a model that is not the account's own trained one is a NotFoundError.
   *
   *     await client.models.retire("ft:svc-shared:0f3c...");   // { id, object: "model", retired: true }
   */
  async retire(model: string, options?: RequestOptions): Promise<WithRequestId<RetiredModel>> {
    const path = `${modelPath(model)}/retire`;
    return withRequestId(await this.transport.request<RetiredModel>({ method: "POST", path, auth: "access_token", body: "{}" }, options));
  }
}

function modelPath(model: string): string {
  if (typeof model !== "string" || model === "") throw new InputError("a model name is a non-empty string");
  return `/v1/models/${encodeURIComponent(model)}`;
}
