/**
 * Schema helpers for JSON read by contract/json.ts, where every object is a Map in document order.
 * Each also accepts a plain object (a client building a request in code), in its JS key order.
 *
 *     fields({ name: z.string() })              // an object with fixed fields; unknown ones refused
 *     orderedMap(z.string(), Question)          // an object keyed by client names -> Map, order kept
 */
import { z } from "zod";
import { toJsonMap, toRecord, type Json } from "./json.ts";

/** Any JSON value as contract/json.ts parses it (objects as Maps); plain objects are accepted too. */
export const JsonValue: z.ZodType<Json> = z.custom<Json>(
  (v) => v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean" || typeof v === "object",
  "expected a JSON value",
);

/** A JSON object with a fixed set of fields: unknown fields are refused, `__proto__` included. */
export function fields<S extends z.ZodRawShape>(shape: S) {
  return z.preprocess(toRecord, z.strictObject(shape));
}

/** A JSON object with a fixed set of fields; unknown fields are dropped (third-party clients add some). */
export function looseFields<S extends z.ZodRawShape>(shape: S) {
  return z.preprocess(toRecord, z.object(shape));
}

/** A JSON object keyed by client-chosen names, read as an ordered Map. */
export function orderedMap<K extends z.ZodType<string>, V extends z.ZodType>(key: K, value: V) {
  return z.preprocess(toJsonMap, z.map(key, value));
}
