import { describe, expect, it } from "vitest";
import { joined, raw, sent, sql, statement } from "./db.ts";

describe("sql: statements composed of pieces", () => {
  it("numbers every parameter in the order it appears, nested pieces included", () => {
    const owned = sql`account_id = ${"acct"}`;
    const statuses = joined(["queued", "running"].map((s) => sql`status = ${s}`), " OR ");
    expect(statement(sql`SELECT id FROM ${raw("batches")} WHERE ${owned} AND (${statuses}) LIMIT ${10}`)).toEqual({
      text: "SELECT id FROM batches WHERE account_id = $1 AND (status = $2 OR status = $3) LIMIT $4",
      params: ["acct", "queued", "running", 10],
    });
  });

  it("makes a parameter of every value, arrays and nulls as they are, and writes only raw text into the statement", () => {
    const ids = ["a", "b"];
    const hostile = "x'; DROP TABLE batches; --";
    expect(statement(sql`WHERE id = ANY (${ids}::uuid[]) AND label = ${hostile} AND metadata IS NOT DISTINCT FROM ${null}`)).toEqual({
      text: "WHERE id = ANY ($1::uuid[]) AND label = $2 AND metadata IS NOT DISTINCT FROM $3",
      params: [ids, hostile, null],
    });
    // The same value twice is two parameters; a piece used twice is numbered twice.
    const piece = sql`x = ${1}`;
    expect(statement(sql`${piece} AND ${piece}`)).toEqual({ text: "x = $1 AND x = $2", params: [1, 1] });
  });

  it("joins no pieces into nothing and one piece into itself", () => {
    expect(statement(sql`SET a = 1${joined([], ", ")}`)).toEqual({ text: "SET a = 1", params: [] });
    expect(statement(joined([sql`b = ${2}`], ", "))).toEqual({ text: "b = $1", params: [2] });
  });

  it("is what every Db sends: text and parameters, a Statement, or a piece", () => {
    expect(sent("SELECT $1", [7])).toEqual({ text: "SELECT $1", params: [7] });
    expect(sent({ text: "SELECT 1" })).toEqual({ text: "SELECT 1", params: [] });
    expect(sent(sql`SELECT ${7}`)).toEqual({ text: "SELECT $1", params: [7] });
  });
});
