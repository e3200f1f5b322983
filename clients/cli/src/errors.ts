/**
 * Exit codes of `svc` and the errors that carry them (runs in a user's terminal).
 *
 *   0    success
 *   1    the service refused, or could not be reached
 *   2    invalid input, settings or file access (nothing was sent, or a login was refused locally)
 *   130  interrupted (Ctrl-C)
 *
 * Every message printed for an error is written here or by the service; no message repeats an API
 * key, a token or a signed URL.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError, ConfigurationError, InputError } from "./sdk.ts";

export const EXIT = { ok: 0, failure: 1, usage: 2, interrupted: 130 } as const;

/** An error with the exit code it ends `svc` with. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** Bad arguments, input or settings: exit 2. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, EXIT.usage);
  }
}

/** The service refused or could not be reached, or the job it ran failed: exit 1. */
export class Failure extends CliError {
  constructor(message: string) {
    super(message, EXIT.failure);
  }
}

/** Ctrl-C: exit 130. */
export class Interrupted extends CliError {
  constructor() {
    super("interrupted", EXIT.interrupted);
  }
}

/** The exit code and the one line to print for any error a command threw. */
export function describeError(err: unknown, interrupted: boolean): { exitCode: number; message: string } {
  if (interrupted || err instanceof APIUserAbortError) return { exitCode: EXIT.interrupted, message: "interrupted" };
  if (err instanceof CliError) return { exitCode: err.exitCode, message: err.message };
  // ConfigurationError covers the settings module's SettingsError.
  if (err instanceof ConfigurationError || err instanceof InputError) {
    return { exitCode: EXIT.usage, message: err.message };
  }
  if (err instanceof APIConnectionTimeoutError) return { exitCode: EXIT.failure, message: err.message };
  if (err instanceof APIConnectionError) return { exitCode: EXIT.failure, message: err.message };
  if (err instanceof APIError) return { exitCode: EXIT.failure, message: err.summary };
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === "EPIPE") return { exitCode: EXIT.ok, message: "" };
  return { exitCode: EXIT.failure, message: `unexpected error: ${(err as Error)?.message ?? String(err)}` };
}
