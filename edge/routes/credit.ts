/**
 * GET /v1/image-credit (runs in workerd): the account's prepaid credit for image decisions, its
 * reserved part and the pricing, with the owner's API key or a signed-in session (edge/auth/image.ts).
 */
import { Hono } from "hono";
import { IMAGE_PRICING, type CreditBalance } from "../../contract/credit.ts";
import { CreditStore } from "../../server-shared/credit.ts";
import { httpDb } from "../../server-shared/db.ts";
import { imageAuth } from "../auth/image.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";

export const credit = new Hono<AppEnv>();

credit.use("/v1/image-credit", imageAuth);
credit.get("/v1/image-credit", async (c) => {
  const { balanceMicroUsd, reservedMicroUsd } = await new CreditStore(httpDb(services(c.env).sql)).balance(c.get("accountId"));
  const body: CreditBalance = { object: "credit_balance", balance_micro_usd: balanceMicroUsd, reserved_micro_usd: reservedMicroUsd, pricing: { ...IMAGE_PRICING } };
  return c.json(body);
});
