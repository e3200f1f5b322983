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

/**
 * What of a caught error may be written to a log: never request content. A ServiceError's message
 * may name what a request sent, so a log gets its code and operator note; a Postgres error's message
 * may quote a value (`invalid input syntax for type json: "..."`), so a log gets its SQLSTATE; a
 * SyntaxError quotes the text it could not parse, so a log gets its name. Anything else (a network
 * failure, a bug) is its name and message, with the system code of its cause (ECONNREFUSED).
 *
 *     log(`sidecar: sweeper: ${loggable(err)}`);
 */
export function loggable(err: unknown): string {
  if (err instanceof ServiceError) return err.operatorNote ? `${err.code}: ${err.operatorNote}` : err.code;
  if (!(err instanceof Error)) return typeof err === "string" ? "a thrown string" : `a thrown ${typeof err}`;
  const { code, severity, routine } = err as Error & { code?: unknown; severity?: unknown; routine?: unknown };
  if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && typeof severity === "string") {
    return `postgres ${severity} ${code}${typeof routine === "string" ? ` (${routine})` : ""}`;
  }
  if (err instanceof SyntaxError) return "SyntaxError (its text not logged)";
  // Node puts the system code on the cause (ECONNREFUSED), Bun on the error (ConnectionRefused).
  const system = (err.cause as { code?: unknown } | undefined)?.code ?? code;
  return `${err.name}: ${err.message}${typeof system === "string" ? ` (${system})` : ""}`;
}
