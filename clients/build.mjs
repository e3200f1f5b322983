/**
 * Builds the client packages (runs on a developer machine and in `npm pack`, with Node alone):
 * each `clients/<name>/` that has a `build.config.json` is bundled with esbuild into `dist/`, with
 * the contract files it imports inside the bundle, so the package installs without the server code.
 *
 *     node clients/build.mjs              # every client package
 *     node clients/build.mjs sdk-ts cli   # these ones
 *
 * build.config.json:
 *
 *     {
 *       "entries": [{ "in": "src/index.ts", "out": "index" }],   // -> dist/index.js
 *       "declarations": true                                     // -> dist/index.d.ts (optional)
 *     }
 *
 * An entry may add `"banner": "#!/usr/bin/env node"`; its output is then made executable. The
 * package's `dependencies` (and peer and optional ones) stay external imports, everything else is
 * bundled; a dependency the root package.json also pins must have the same version, and a bundle
 * that imports anything else (but `node:` modules) fails the build. Declarations are emitted by tsc
 * under `dist/types/` (with the repository's layout, contract files included) and re-exported from
 * `dist/<out>.d.ts`.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { builtinModules, createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const CLIENTS = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(CLIENTS);
const CONFIG = "build.config.json";

const readJson = (path) => JSON.parse(readFileSync(path, "utf8"));

/** Client packages named on the command line, or every one with a build config. */
function packages(names) {
  const all = readdirSync(CLIENTS).filter((name) => existsSync(join(CLIENTS, name, CONFIG)));
  if (names.length === 0) return all;
  for (const name of names) if (!all.includes(name)) throw new Error(`clients/${name} has no ${CONFIG}`);
  return names;
}

/** The package's runtime dependencies: kept external, and pinned as the repository pins them. */
function externals(dir, pkg) {
  const deps = { ...pkg.peerDependencies, ...pkg.optionalDependencies, ...pkg.dependencies };
  const root = readJson(join(ROOT, "package.json"));
  const pinned = { ...root.devDependencies, ...root.dependencies };
  for (const [name, version] of Object.entries(deps)) {
    if (name in pinned && pinned[name] !== version && !version.startsWith("file:")) {
      throw new Error(`${relative(ROOT, dir)}/package.json pins ${name} ${version}, the repository ${pinned[name]}: use one version`);
    }
  }
  return Object.keys(deps);
}

const isBuiltin = (path) => path.startsWith("node:") || builtinModules.includes(path);
const packageOf = (path) => path.split("/").slice(0, path.startsWith("@") ? 2 : 1).join("/");

async function bundle(dir, entry, external) {
  const outfile = join(dir, "dist", `${entry.out}.js`);
  const result = await build({
    entryPoints: [join(dir, entry.in)],
    outfile,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: external.flatMap((name) => [name, `${name}/*`]),
    banner: entry.banner ? { js: entry.banner } : undefined,
    metafile: true,
    logLevel: "warning",
  });
  const imports = Object.values(result.metafile.outputs).flatMap((output) => output.imports.map((i) => i.path));
  const stray = imports.filter((path) => !isBuiltin(path) && !external.includes(packageOf(path)));
  if (stray.length > 0) throw new Error(`${relative(ROOT, outfile)} imports ${stray.join(", ")}, which its package.json does not depend on`);
  if (entry.banner?.startsWith("#!")) chmodSync(outfile, 0o755);
}

/** Type declarations of the entries, by tsc, with `.ts` import specifiers written as `.js`. */
function declarations(dir, entries) {
  const typesDir = join(dir, "dist", "types");
  const tsconfig = join(dir, "dist", "tsconfig.types.json");
  writeFileSync(
    tsconfig,
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "ESNext",
        moduleResolution: "Bundler",
        lib: ["ES2023"],
        // Node's types alone: a client that used a Bun API would fail here.
        types: ["node"],
        strict: true,
        skipLibCheck: true,
        isolatedModules: true,
        verbatimModuleSyntax: true,
        allowImportingTsExtensions: true,
        declaration: true,
        emitDeclarationOnly: true,
        rootDir: ROOT,
        outDir: typesDir,
      },
      files: entries.map((entry) => join(dir, entry.in)),
    }),
  );
  const tsc = createRequire(join(ROOT, "package.json")).resolve("typescript/bin/tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", tsconfig], { stdio: "inherit" });
  } finally {
    rmSync(tsconfig);
  }
  for (const file of walk(typesDir)) {
    const text = readFileSync(file, "utf8");
    writeFileSync(file, text.replace(/((?:from\s+|import\(\s*)["'](?:\.{1,2}\/)[^"']*?)\.ts(["'])/g, "$1.js$2"));
  }
  for (const entry of entries) {
    const target = relative(join(dir, "dist"), join(typesDir, relative(ROOT, join(dir, entry.in)))).replace(/\.ts$/, ".js");
    writeFileSync(join(dir, "dist", `${entry.out}.d.ts`), `export * from "./${target}";\n`);
  }
}

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

for (const name of packages(process.argv.slice(2))) {
  const dir = resolve(CLIENTS, name);
  const config = readJson(join(dir, CONFIG));
  const pkg = readJson(join(dir, "package.json"));
  const entries = config.entries ?? [];
  if (entries.length === 0) throw new Error(`clients/${name}/${CONFIG} names no entries`);
  rmSync(join(dir, "dist"), { recursive: true, force: true });
  mkdirSync(join(dir, "dist"));
  const external = externals(dir, pkg);
  for (const entry of entries) await bundle(dir, entry, external);
  if (config.declarations) declarations(dir, entries);
  console.log(`built ${pkg.name}@${pkg.version} in clients/${name}/dist`);
}
