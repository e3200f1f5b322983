/**
 * `svc`: the decision service's command-line tool (runs in a user's terminal, on Node 20 or later).
 * Finds the command, runs it with Ctrl-C wired to an abort signal, and turns what it threw into one
 * line on standard error and an exit code (errors.ts): 0, 1 (the service), 2 (input, settings,
 * files), 130 (interrupted).
 */
import { helpOf, groupHelp, parse, type Command, type Group, type Listing } from "./command.ts";
import { createContext } from "./context.ts";
import { batches } from "./commands/batches.ts";
import { decide } from "./commands/decide.ts";
import { keys } from "./commands/keys.ts";
import { login, logout } from "./commands/login.ts";
import { models } from "./commands/models.ts";
import { train } from "./commands/train.ts";
import { webhooks } from "./commands/webhooks.ts";
import { describeError, EXIT, UsageError } from "./errors.ts";
import { VERSION } from "./sdk.ts";

const TOP: Listing = {
  name: "",
  summary: `svc ${VERSION}: the decision service's command-line tool`,
  description: [
    "Settings: SVC_API_KEY, SVC_BASE_URL (the service's address, without /v1/...), SVC_DEFAULT_MODEL",
    "(default svc-shared), SVC_CONFIG_PATH (default ~/.svc/config.json). With SVC_API_KEY set, the",
    "environment names the key and the address; otherwise the key and address saved by `svc login`",
    "are used, SVC_BASE_URL overriding the saved address. `svc train`, `svc keys` and `svc webhooks`",
    "take the browser sign-in saved by `svc login` instead of a key (or SVC_ACCESS_TOKEN, a user access",
    "token, with SVC_BASE_URL).",
    "",
    "Exit codes: 0 success, 1 the service refused or could not be reached, 2 invalid input, settings",
    "or file access, 130 interrupted.",
  ].join("\n"),
  commands: [login, logout, models, decide, batches, train, keys, webhooks],
};

const GROUPS: Group[] = [batches, train, keys, webhooks];

/** The command `argv` names and the arguments left for it; a string is help text to print. */
function find(argv: string[]): { command: Command; rest: string[] } | string {
  const [first, ...rest] = argv;
  if (first === undefined || first === "--help" || first === "-h" || first === "help") return groupHelp(TOP, "svc COMMAND [options]");
  if (first === "--version" || first === "-V") return `${VERSION}\n`;
  const direct = [login, logout, models, decide].find((c) => c.name === first);
  if (direct) return { command: direct, rest };
  const group = GROUPS.find((g) => g.name === first);
  if (!group) throw new UsageError(`unknown command ${JSON.stringify(first.slice(0, 40))}\nRun \`svc --help\` for the commands.`);
  const [sub, ...subRest] = rest;
  if (sub === undefined || sub === "--help" || sub === "-h") return groupHelp(group, `svc ${group.name} COMMAND [options]`);
  if (sub.startsWith("-")) throw new UsageError(`unknown option ${sub.split("=")[0]!.slice(0, 40)}\nRun \`svc ${group.name} --help\` for its commands.`);
  const command = group.commands.find((c) => c.name === sub);
  if (!command) throw new UsageError(`unknown command ${JSON.stringify(`${group.name} ${sub.slice(0, 40)}`)}\nRun \`svc ${group.name} --help\` for its commands.`);
  return { command: { ...command, name: `${group.name} ${command.name}` }, rest: subRest };
}

async function main(argv: string[]): Promise<number> {
  const controller = new AbortController();
  let interrupted = false;
  process.on("SIGINT", () => {
    if (interrupted) process.exit(EXIT.interrupted);
    interrupted = true;
    controller.abort(new Error("interrupted"));
    // Whatever the command is waiting for, it does not outlive a Ctrl-C by long.
    setTimeout(() => process.exit(EXIT.interrupted), 2000).unref();
  });
  const ctx = createContext({ env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, signal: controller.signal });
  try {
    const found = find(argv);
    if (typeof found === "string") {
      process.stdout.write(found);
      return EXIT.ok;
    }
    const args = parse(found.command, found.rest);
    if (args === null) {
      process.stdout.write(helpOf(found.command));
      return EXIT.ok;
    }
    const code = (await found.command.run(ctx, args)) ?? EXIT.ok;
    return interrupted ? EXIT.interrupted : code;
  } catch (err) {
    const { exitCode, message } = describeError(err, interrupted);
    if (message) process.stderr.write(`svc: ${message}\n`);
    return exitCode;
  }
}

const code = await main(process.argv.slice(2));
// Output written to a pipe is flushed before the process ends; sockets kept alive do not hold it open.
process.stdout.write("", () => process.exit(code));
