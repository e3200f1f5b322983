/**
 * Reading a secret from the terminal without echo (runs in a user's terminal). Standard input is put
 * in raw mode, so the terminal shows nothing of what is typed, and each key is handled here:
 * Enter ends, Backspace deletes, Ctrl-C interrupts (exit 130), Ctrl-D on an empty line gives up.
 *
 *     const key = await readSecret(process.stdin, process.stderr, "API key: ");
 */
import type { ReadStream } from "node:tty";
import { Interrupted, UsageError } from "./errors.ts";

const CTRL_C = "\u0003";
const CTRL_D = "\u0004";
const CTRL_U = "\u0015";
const BACKSPACE = new Set(["\u007f", "\b"]);

export function readSecret(stdin: ReadStream, out: NodeJS.WritableStream, prompt: string): Promise<string> {
  // Echo goes off before the prompt shows: a key typed or pasted the moment it appears is not echoed.
  stdin.setRawMode(true);
  out.write(prompt);
  stdin.setEncoding("utf8");
  stdin.resume();
  let secret = "";
  return new Promise<string>((resolve, reject) => {
    const finish = (error?: Error) => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      out.write("\n");
      if (error) reject(error);
      else resolve(secret);
    };
    const onData = (chunk: string) => {
      for (const char of chunk) {
        if (char === "\r" || char === "\n") return finish();
        if (char === CTRL_C) return finish(new Interrupted());
        if (char === CTRL_D && secret === "") return finish(new UsageError("no API key was entered"));
        if (BACKSPACE.has(char)) secret = [...secret].slice(0, -1).join("");
        else if (char === CTRL_U) secret = "";
        else if (char >= " ") secret += char;
      }
    };
    stdin.on("data", onData);
  });
}
