/**
 * `client.imageCredit`: the account's prepaid credit for image decisions and the published price
 * (GET /v1/image-credit). Amounts are integers of micro-USD; text decisions are not charged.
 *
 *     const credit = await client.imageCredit.retrieve();
 *     credit.balance_micro_usd;    // what new image decisions may reserve
 *     credit.reserved_micro_usd;   // held by image decisions in flight
 *     credit.pricing;              // { currency: "USD", micro_usd_per_billable_token: 2 }
 *
 * The route takes either credential, as the image assets do: the client's API key when it has one,
 * else its access token.
 */
import type { CreditBalance } from "../../../../contract/credit.ts";
import { withRequestId, type Credential, type RequestOptions, type Transport, type WithRequestId } from "../core.ts";

/** Either credential: the API key when the client has one, else the signed-in user's access token. */
const auth: readonly Credential[] = ["api_key", "access_token"];

export class ImageCredit {
  constructor(private readonly transport: Transport) {}

  /**
   * The account's credit: the balance new image decisions may reserve, what decisions in flight
   * hold, and the price per billable token. Credit is granted by the deployment's operator; an image
   * decision it cannot cover is refused with PaymentRequiredError (402) before any GPU work.
   *
   *     const { balance_micro_usd, pricing } = await client.imageCredit.retrieve();
   */
  async retrieve(options?: RequestOptions): Promise<WithRequestId<CreditBalance>> {
    return withRequestId(await this.transport.request<CreditBalance>({ method: "GET", path: "/v1/image-credit", auth }, options));
  }
}
