/**
 * `svc models [--json]` and `svc train list` (run in a user's terminal): the models the key may use.
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

export const trainList: Command = {
  name: "list",
  summary: "List the trained (calibrated) releases this API key may use",
  usage: "svc train list [--json]",
  description: [
    "This service trains text models only by calibration: an operator fits a release's calibration on",
    "labelled data and publishes the result as a new release with its report. This lists those",
    "releases among the models the key may use (GET /v1/models, the items with a calibration report),",
    "with the report's address. The service has no API for text training jobs, so no jobs are listed;",
    "when no calibrated release is available, it says so and exits 0.",
  ].join("\n"),
  options: { json: { type: "boolean", help: "print the listed models as JSON ({models: [...]})" } },
  async run(ctx, { values }) {
    const list = await ctx.client().models.list({ signal: ctx.signal });
    const trained = list.models.filter((model) => typeof model.calibration === "string");
    if (values.json) {
      ctx.stdout.write(`${JSON.stringify({ models: trained })}\n`);
      return;
    }
    if (trained.length === 0) {
      ctx.stdout.write("No trained (calibrated) releases are available to this key, and this service runs no text training jobs.\n");
      return;
    }
    ctx.stdout.write(renderModels(trained));
    for (const model of trained) ctx.stdout.write(`${model.name}: calibration report at ${model.calibration}\n`);
  },
};
