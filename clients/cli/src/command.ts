/**
 * How a `svc` command is described, parsed and helped (runs in a user's terminal). Each command is a
 * plain object; `node:util` parseArgs reads its options strictly, so an unknown flag, a missing value
 * or an extra argument is a usage error (exit 2), and `--help` / `-h` works on every command.
 *
 *     const models: Command = {
 *       name: "models", summary: "List the models this key may use", usage: "svc models [--json]",
 *       options: { json: { type: "boolean", help: "print the response JSON" } },
 *       run: async (ctx) => { ... },
 *     };
 */
import { parseArgs } from "node:util";
import type { Context } from "./context.ts";
import { UsageError } from "./errors.ts";

export interface Option {
  type: "string" | "boolean";
  short?: string;
  /** The value's placeholder in help (`SECONDS`, `FILE`). */
  value?: string;
  /** A string option that may be given more than once: its value is then every one, in order (string[]). */
  multiple?: boolean;
  help: string;
}

export interface Parsed {
  values: Record<string, string | string[] | boolean | undefined>;
  positionals: string[];
}

export interface Command {
  /** The words after `svc` (`"batches run"`). */
  name: string;
  summary: string;
  /** Usage lines, without the leading "Usage: ". */
  usage: string;
  /** Paragraphs after the usage line. */
  description?: string;
  options?: Record<string, Option>;
  /** How many positional arguments the command takes. */
  positionals?: { min: number; max: number };
  /** Returns the exit code (0 when nothing is returned). */
  run(ctx: Context, args: Parsed): Promise<number | void>;
}

/** A command with sub-commands (`svc batches ...`): it only dispatches and helps. */
export interface Group {
  name: string;
  summary: string;
  description?: string;
  commands: Command[];
}

/** What a help listing shows: a name and a summary per entry. */
export interface Listing {
  name: string;
  summary: string;
  description?: string;
  commands: ReadonlyArray<{ name: string; summary: string }>;
}

const HELP: Option = { type: "boolean", short: "h", help: "show this help" };

export function helpOf(command: Command): string {
  const lines = [`Usage: ${command.usage}`, "", command.summary + "."];
  if (command.description) lines.push("", command.description);
  const options = Object.entries({ ...command.options, help: HELP });
  lines.push("", "Options:");
  const labels = options.map(([name, option]) => {
    const short = option.short ? `-${option.short}, ` : "    ";
    return `${short}--${name}${option.type === "string" ? ` ${option.value ?? "VALUE"}` : ""}`;
  });
  const width = Math.max(...labels.map((label) => label.length)) + 2;
  options.forEach(([, option], i) => lines.push(`  ${labels[i]!.padEnd(width)}${option.help}`));
  return `${lines.join("\n")}\n`;
}

export function groupHelp(group: Listing, usage: string): string {
  const width = Math.max(...group.commands.map((c) => c.name.length)) + 2;
  const lines = [`Usage: ${usage}`, "", group.summary + "."];
  if (group.description) lines.push("", group.description);
  lines.push("", "Commands:");
  for (const command of group.commands) lines.push(`  ${command.name.padEnd(width)}${command.summary}`);
  lines.push("", `Run \`svc ${group.name ? `${group.name} ` : ""}COMMAND --help\` for a command's options.`);
  return `${lines.join("\n")}\n`;
}

/** Parses `argv` for `command`; throws UsageError. Returns null when help was asked for. */
export function parse(command: Command, argv: string[]): Parsed | null {
  const options = Object.fromEntries(
    Object.entries({ ...command.options, help: HELP }).map(([name, option]) => [
      name,
      { type: option.type, ...(option.short ? { short: option.short } : {}), ...(option.multiple ? { multiple: true } : {}) },
    ]),
  );
  let parsed: Parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true }) as Parsed;
  } catch (err) {
    throw new UsageError(`${parseMessage(err as Error & { code?: string })}\nRun \`svc ${command.name} --help\` for its options.`);
  }
  if (parsed.values.help) return null;
  const { min, max } = command.positionals ?? { min: 0, max: 0 };
  if (parsed.positionals.length < min) throw new UsageError(`missing argument\nUsage: ${command.usage}`);
  if (parsed.positionals.length > max) {
    throw new UsageError(`${max === 0 ? "this command takes no arguments" : "too many arguments"}\nUsage: ${command.usage}`);
  }
  return parsed;
}

/** parseArgs' messages, rewritten so that no value the user typed is repeated (it may be a secret). */
function parseMessage(err: Error & { code?: string }): string {
  const option = /'(-{1,2}[^'=\s]{0,40})/.exec(err.message)?.[1] ?? "an option";
  if (err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") return `unknown option ${option}`;
  if (err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    if (/does not take an argument/.test(err.message)) return `${option} takes no value`;
    return `${option} needs a value (write --name=VALUE for a value that starts with a dash)`;
  }
  return "the arguments could not be read";
}
