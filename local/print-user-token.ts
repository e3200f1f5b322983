/**
 * `bun local/print-user-token.ts [login]`: prints a user access token of the running `npm start`
 * stack's identity provider, for calling the key-management routes by hand (developer machine
 * only). Only the token goes to stdout:
 *
 *     curl -H "authorization: Bearer $(bun local/print-user-token.ts alice)" http://127.0.0.1:8787/v1/keys
 *
 * The provider is found through `<stack dir>/idp/idp.json` (SVC_STACK_DIR, default .local/stack).
 * Exits 1 with one line on stderr when no stack is running or sign-in fails.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { idpInfoPath, type IdpInfo } from "./idp.ts";
import { stackDir } from "./running.ts";
import { getUserAccessToken, SignInError } from "./user-token.ts";

const login = process.argv[2] ?? "dev-user";
const infoPath = idpInfoPath(join(stackDir(), "idp"));

function fail(line: string): never {
  console.error(line);
  process.exit(1);
}

if (!existsSync(infoPath)) fail("No local stack is running (no identity provider found); start it with `npm start`.");
const info = JSON.parse(readFileSync(infoPath, "utf8")) as IdpInfo;
try {
  console.log(await getUserAccessToken({ issuer: info.issuer, clientId: info.clientId, login }));
} catch (err) {
  if (err instanceof SignInError) fail(`Sign-in at ${info.issuer} failed: ${err.message}`);
  // Anything else is the connection: idp.json outlived a stack that was killed.
  fail(`No local stack is running (the identity provider at ${info.issuer} does not answer); start it with \`npm start\`.`);
}
