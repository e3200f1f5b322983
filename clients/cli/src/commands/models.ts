/**
 * `svc models [--json]` (runs in a user's terminal): the models the key may use.
 */
import type { Command } from "../command.ts";
import { renderModels } from "../render.ts";

export const models: Command = {
  name: "models",
  summary: "List the models this API key may use",
  usage: "svc models [--json]",
  description: "Each model is a release with the aliases that name it (GET /v1/models); `svc decide --model` takes either.",
  options: { json: { type: "boolean", help: "print the response JSON" } },
  async run(ctx, { values }) {
    const list = await ctx.client().models.list({ signal: ctx.signal });
    ctx.stdout.write(values.json ? `${JSON.stringify({ models: list.models })}\n` : renderModels(list.models));
  },
};
