/**
 * The error every server tier throws for an outcome the caller should see: a stable code from the
 * contract's table, rendered as the one envelope by `errorRenderer` (server-shared/http.ts).
 *
 *     throw new ServiceError("model_not_found", "no model of that name is available to this account");
 *
 * `operatorNote`, when set, is written to the tier's log for operators (it names releases, limits or
 * settings, never request content); the client sees only `code` and `message`.
 */
import { errorBody, ERROR_STATUS, type ErrorCode, type ErrorEnvelope } from "../contract/errors.ts";

export class ServiceError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly operatorNote?: string,
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }
  toBody(): ErrorEnvelope {
    return errorBody(this.code, this.message);
  }
}
