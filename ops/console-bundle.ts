/**
 * `npm run build:console`: the web console (console/) bundled into the static assets the edge Worker
 * serves at /console (wrangler.toml `[assets]`), under `.local/console/`. wrangler runs it before
 * every build of the edge (`[build]`), so `wrangler deploy` and `npm run build:edge` always carry the
 * console of the checkout; the local edge (local/edge-main.ts) serves its own copy in its data
 * directory, since workerd keeps the folder it serves open and a rebuild would leave it serving a
 * deleted one. Runs under Bun on an operator's, CI's or a developer's machine.
 *
 *     console bundle: 3 files, 612.4 KiB (gzip 181.0 KiB)
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { CONSOLE_STYLE_HASHES_FILE } from "../contract/console.ts";

const ROOT = resolve(import.meta.dirname, "..");
export const CONSOLE_ASSETS_DIR = join(ROOT, ".local", "console");

/**
 * Bundles console/index.html (its script and styles, hashed names under /console/) into `outdir`
 * (CONSOLE_ASSETS_DIR by default). It is built aside and renamed into place, so a build running
 * beside another (tests start several edges) never finds the folder half written.
 */
export async function buildConsole(outdir = CONSOLE_ASSETS_DIR): Promise<{ files: string[]; bytes: number; gzipBytes: number }> {
  const aside = `${outdir}.${process.pid}.tmp`;
  rmSync(aside, { recursive: true, force: true });
  const result = await Bun.build({
    entrypoints: [join(ROOT, "console", "index.html")],
    outdir: aside,
    publicPath: "/console/",
    minify: true,
    target: "browser",
    naming: { entry: "[name].[ext]", chunk: "[name]-[hash].[ext]", asset: "[name]-[hash].[ext]" },
    define: { "process.env.NODE_ENV": JSON.stringify("production") },
  });
  if (!result.success) throw new Error(`the console did not build:\n${result.logs.map(String).join("\n")}`);
  writeFileSync(join(aside, CONSOLE_STYLE_HASHES_FILE), JSON.stringify(inlineStyleHashes(aside)));
  // Measured aside: once renamed, a build running beside this one may replace the folder.
  const files = readdirSync(aside);
  let bytes = 0;
  let gzipBytes = 0;
  for (const file of files) {
    const path = join(aside, file);
    if (!statSync(path).isFile()) continue;
    bytes += statSync(path).size;
    gzipBytes += gzipSync(readFileSync(path)).length;
  }
  rmSync(outdir, { recursive: true, force: true });
  try {
    renameSync(aside, outdir);
  } catch (err) {
    // Another build of the same checkout put its folder in place in between: the same files.
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
    rmSync(aside, { recursive: true, force: true });
  }
  return { files, bytes, gzipBytes };
}

/**
 * The SHA-256 hashes (CSP source expressions) of the style elements the components render inline
 * (Radix's scroll areas and selects hide native scrollbars with a literal `<style>`), read from the
 * built scripts: the page's policy allows exactly these and no other inline style.
 */
function inlineStyleHashes(dir: string): string[] {
  const hashes = new Set<string>();
  for (const file of readdirSync(dir).filter((name) => name.endsWith(".js"))) {
    const code = readFileSync(join(dir, file), "utf8");
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
