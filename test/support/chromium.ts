/**
 * Debian's Chromium for the browser tests (runs only in tests): CHROMIUM_PATH, or /usr/bin/chromium,
 * installed with apt-get when missing and the tests run as root (as `npm start` installs
 * redis-server), so `npm test` needs nothing else on a fresh Debian machine.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const DEBIAN_CHROMIUM = "/usr/bin/chromium";

export function chromiumPath(): string {
  const named = process.env.CHROMIUM_PATH;
  if (named) return named;
  if (existsSync(DEBIAN_CHROMIUM)) return DEBIAN_CHROMIUM;
  if (process.getuid?.() !== 0) throw new Error("Chromium is not installed: run `sudo apt-get install chromium`, or set CHROMIUM_PATH to a Chromium build");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () => spawnSync("apt-get", ["install", "-y", "-qq", "chromium"], { env, encoding: "utf8", timeout: 600_000 });
  let result = install();
  if (result.status !== 0) {
    spawnSync("apt-get", ["update", "-qq"], { env, encoding: "utf8", timeout: 300_000 });
    result = install();
  }
  if (result.status !== 0 || !existsSync(DEBIAN_CHROMIUM)) throw new Error(`apt-get could not install chromium:\n${result.stderr}`);
  return DEBIAN_CHROMIUM;
}
