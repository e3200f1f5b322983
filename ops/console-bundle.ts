/**
 * `npm run build:console`: the web console (console/) bundled into the static assets the edge Worker
 * serves at /console (wrangler.toml `[assets]`), under `.local/console/`. wrangler runs it before
 * every build of the edge (`[build]`), so `wrangler deploy`, `npm run build:edge`, `npm start` and the
 * tests always serve the console of the checkout. Runs under Bun on an operator's or CI's machine.
 *
 *     console bundle: 3 files, 612.4 KiB (gzip 181.0 KiB)
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { CONSOLE_STYLE_HASHES_FILE } from "../contract/console.ts";

const ROOT = resolve(import.meta.dirname, "..");
export const CONSOLE_ASSETS_DIR = join(ROOT, ".local", "console");

/** Bundles console/index.html (its script and styles, hashed names under /console/) into CONSOLE_ASSETS_DIR. */
export async function buildConsole(): Promise<{ files: string[]; bytes: number; gzipBytes: number }> {
  rmSync(CONSOLE_ASSETS_DIR, { recursive: true, force: true });
  const result = await Bun.build({
    entrypoints: [join(ROOT, "console", "index.html")],
    outdir: CONSOLE_ASSETS_DIR,
    publicPath: "/console/",
    minify: true,
    target: "browser",
    naming: { entry: "[name].[ext]", chunk: "[name]-[hash].[ext]", asset: "[name]-[hash].[ext]" },
    define: { "process.env.NODE_ENV": JSON.stringify("production") },
  });
  if (!result.success) throw new Error(`the console did not build:\n${result.logs.map(String).join("\n")}`);
  writeFileSync(join(CONSOLE_ASSETS_DIR, CONSOLE_STYLE_HASHES_FILE), JSON.stringify(inlineStyleHashes()));
  const files = readdirSync(CONSOLE_ASSETS_DIR);
  let bytes = 0;
  let gzipBytes = 0;
  for (const file of files) {
    const path = join(CONSOLE_ASSETS_DIR, file);
    if (!statSync(path).isFile()) continue;
    bytes += statSync(path).size;
    gzipBytes += gzipSync(readFileSync(path)).length;
  }
  return { files, bytes, gzipBytes };
}

/**
 * The SHA-256 hashes (CSP source expressions) of the style elements the components render inline
 * (Radix's scroll areas and selects hide native scrollbars with a literal `<style>`), read from the
 * built scripts: the page's policy allows exactly these and no other inline style.
 */
function inlineStyleHashes(): string[] {
  const hashes = new Set<string>();
  for (const file of readdirSync(CONSOLE_ASSETS_DIR).filter((name) => name.endsWith(".js"))) {
    const code = readFileSync(join(CONSOLE_ASSETS_DIR, file), "utf8");
    for (const match of code.matchAll(/__html:("(?:[^"\\]|\\.)*")/g)) {
      const css = JSON.parse(match[1]!) as string;
      hashes.add(`'sha256-${createHash("sha256").update(css).digest("base64")}'`);
    }
  }
  return [...hashes].sort();
}

if (import.meta.main) {
  const built = await buildConsole();
  const kib = (n: number) => (n / 1024).toFixed(1);
  console.error(`console bundle: ${built.files.length} files, ${kib(built.bytes)} KiB (gzip ${kib(built.gzipBytes)} KiB)`);
}
