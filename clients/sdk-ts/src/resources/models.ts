/**
 * `client.models`: the models this account may use, each a release with its aliases.
 *
 *     const { models } = await client.models.list();
 *     models.map((m) => [m.name, ...m.aliases]);
 */
import type { ModelList } from "../../../../contract/models.ts";
import { type RequestOptions, type Transport, type WithRequestId, withRequestId } from "../core.ts";

export class Models {
  constructor(private readonly transport: Transport) {}

  /**
   * Every serving release the account may use (shared ones and its own), newest first, with the
   * aliases that name it.
   *
   *     const { models } = await client.models.list();
   *     console.log(models[0]?.name, models[0]?.aliases);
   */
  async list(options?: RequestOptions): Promise<WithRequestId<ModelList>> {
    return withRequestId(await this.transport.request<ModelList>({ method: "GET", path: "/v1/models" }, options));
  }
}
