/**
 * Path and query parameters, read from the request and validated by their schema in the contract's
 * route table (contract/routes.ts PARAMETERS), so a limit such as "1 to 100 batches a page" is
 * written once (runs in workerd). A parameter's text is tried as a string first and, for a numeric
 * schema, as the integer it spells (digits only: no sign, exponent, spaces or leading zeros).
 *
 *     const limit = queryParam(c, PARAMETERS.batchListLimit);  // number (its default when absent); 422 otherwise
 *     const id = pathParam(c, PARAMETERS.batchId);             // null when malformed: the route's own 404
 */
import type { Context } from "hono";
import type { z } from "zod";
import { describeIssues } from "../contract/json.ts";
import type { Parameter } from "../contract/routes.ts";
import { ServiceError } from "../server-shared/errors.ts";

const INTEGER_TEXT = /^(0|[1-9][0-9]{0,15})$/;

function parse<S extends z.ZodType>(schema: S, text: string | undefined): z.ZodSafeParseResult<z.output<S>> {
  const asText = schema.safeParse(text);
  if (asText.success || text === undefined || !INTEGER_TEXT.test(text)) return asText;
  return schema.safeParse(Number(text));
}

/** A query parameter's value (its default, or undefined, when absent); 422 invalid_request naming it otherwise. */
export function queryParam<S extends z.ZodType>(c: Context, parameter: Parameter<S>): z.output<S> {
  const parsed = parse(parameter.schema, c.req.query(parameter.name));
  if (!parsed.success) throw new ServiceError("invalid_request", `query parameter ${parameter.name}: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/** A path parameter's value; null when it does not fit its schema, which the route answers as the unknown name it is. */
export function pathParam<S extends z.ZodType>(c: Context, parameter: Parameter<S>): z.output<S> | null {
  const parsed = parse(parameter.schema, c.req.param(parameter.name));
  return parsed.success ? parsed.data : null;
}
