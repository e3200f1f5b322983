/**
 * The model registry, for operators and the local stack launcher (runs on an operator's machine
 * against DATABASE_URL, or the running `npm start` stack when it is unset).
 *
 *   npm run registry -- list
 *   npm run registry -- add <release-id> --fingerprint <sha256 hex> --url <runtime URL> --token-env <VAR>
 *                          [--sidecar-url <sidecar URL>] [--owners <uuid,uuid>] [--release-date YYYY-MM-DD]
 *                          [--description <text>] [--modality text|image]
 *   npm run registry -- alias <alias> <release-id>
 *   npm run registry -- retire <release-id>
 *   npm run registry -- calibrate <new-release-id> --base <release-id> --data <labelled.jsonl> [--alias <alias>]
 *
 * A release is immutable in id and fingerprint (a trigger in schema.sql enforces it); its addresses may
 * move. `--url` is the runtime's address (only the sidecar calls it); `--sidecar-url` is the sidecar
 * that serves the release (the edge forwards its decisions there, and that sidecar's SIDECAR_URL must
 * be the same string); a release without one is registered but not served. Retiring keeps the row (old batches may name it) but stops serving it.
 * `calibrate` fits a calibration on labelled data and registers it as a new release (ops/calibrate.ts); the
 * statements are ops/releases.ts.
 */
import type pg from "pg";
import { calibrateRelease } from "./calibrate.ts";
import { runOperatorCommand } from "./command.ts";
import { listReleases, pointAlias, registerRelease, retireRelease } from "./releases.ts";

function flags(args: string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) {
    const flag = args[i] ?? "";
    const value = args[i + 1];
    if (!flag.startsWith("--") || value === undefined) throw new Error(`expected --flag value pairs, got ${flag}`);
    map.set(flag.slice(2), value);
  }
  return map;
}

/** --modality: "text" (the default) or "image" (an image runtime's backbone). */
function modalityOf(value: string | undefined): "text" | "image" {
  if (value === undefined || value === "text" || value === "image") return value ?? "text";
  throw new Error(`--modality must be text or image, got ${JSON.stringify(value)}`);
}

async function main(db: pg.Client, argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const usage = "usage: npm run registry -- list | add <release-id> --fingerprint F --url U --token-env VAR [--sidecar-url S ...] | alias <alias> <release-id> | retire <release-id> | calibrate <new-release-id> --base B --data FILE [--alias A]";
  if (command === "list") {
    console.log(JSON.stringify(await listReleases(db), null, 2));
  } else if (command === "add" && rest[0]) {
    const f = flags(rest.slice(1));
    const required = (name: string) => {
      const value = f.get(name);
      if (!value) throw new Error(`add needs --${name}`);
      return value;
    };
    await registerRelease(db, {
      id: rest[0],
      fingerprint: required("fingerprint"),
      url: required("url"),
      token_env: required("token-env"),
      owners: f.get("owners")?.split(",") ?? null,
      sidecar_url: f.get("sidecar-url") ?? null,
      release_date: f.get("release-date") ?? new Date().toISOString().slice(0, 10),
      description: f.get("description") ?? "",
      modality: modalityOf(f.get("modality")),
    });
    console.error(`release ${rest[0]} registered`);
  } else if (command === "alias" && rest[0] && rest[1]) {
    await pointAlias(db, rest[0], rest[1]);
    console.error(`${rest[0]} -> ${rest[1]}`);
  } else if (command === "calibrate" && rest[0]) {
    const f = flags(rest.slice(1));
    const base = f.get("base");
    const data = f.get("data");
    if (!base || !data) throw new Error("calibrate needs --base and --data");
    const report = await calibrateRelease(db, { id: rest[0], base, dataPath: data, alias: f.get("alias") ?? null, env: process.env });
    console.log(JSON.stringify(report, null, 2));
    console.error(`release ${rest[0]} registered, calibrated from ${base}${f.has("alias") ? `; ${f.get("alias")} -> ${rest[0]}` : ""}`);
  } else if (command === "retire" && rest[0]) {
    await retireRelease(db, rest[0]);
    console.error(`release ${rest[0]} retired`);
  } else {
    console.error(usage);
    return 2;
  }
  return 0;
}

if (import.meta.main) await runOperatorCommand((db) => main(db, process.argv.slice(2)));
