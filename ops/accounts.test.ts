import { describe, expect, it } from "vitest";
import { parseCredit, parseSettings } from "./accounts.ts";

describe("parseSettings (npm run account -- set ...)", () => {
  it("reads positive integers and none for each known setting", () => {
    expect(parseSettings(["--requests-per-second", "5", "--tokens-per-second", "none", "--max-batch-storage-bytes", "26214400"])).toEqual({
      requests_per_second: 5,
      tokens_per_second: null,
      max_batch_storage_bytes: 26_214_400,
    });
  });

  it.each([
    [["--requests-per-second", "0"], /positive integer or none/],
    [["--requests-per-second", "-3"], /positive integer or none/],
    [["--requests-per-second", "1.5"], /positive integer or none/],
    [["--requests-per-second"], /needs a value/],
    [["--rps", "5"], /unknown setting --rps/],
    [[], /at least one setting/],
  ])("refuses %j", (args, message) => {
    expect(() => parseSettings(args)).toThrow(message);
  });
});

describe("parseCredit (npm run account -- credit <account> ...)", () => {
  it.each([
    ["5", 5_000_000],
    ["0.25", 250_000],
    ["0.000001", 1],
    ["12.5", 12_500_000],
    ["007", 7_000_000],
    ["1000000", 1_000_000_000_000],
  ])("reads %s US dollars as %i micro-USD, exactly", (usd, micro) => {
    expect(parseCredit([usd])).toEqual({ amountMicroUsd: micro, note: "operator grant" });
  });

  it("takes a note", () => {
    expect(parseCredit(["5", "--note", "pilot, issue 28"])).toEqual({ amountMicroUsd: 5_000_000, note: "pilot, issue 28" });
  });

  it.each([
    [["0"], /above 0/],
    [["0.000000"], /at most 6 decimals|above 0/],
    [["-5"], /above 0/],
    [["-0.5"], /above 0/],
    [["0.0000001"], /at most 6 decimals/],
    [["1.1234567"], /at most 6 decimals/],
    [["five"], /US dollars/],
    [["5usd"], /US dollars/],
    [["1e3"], /US dollars/],
    [["$5"], /US dollars/],
    [[".5"], /US dollars/],
    [["5."], /US dollars/],
    [["Infinity"], /US dollars/],
    [["99999999999"], /US dollars/],
    [[], /needs an amount/],
    [["5", "--note"], /--note needs a text/],
    [["5", "--note", " "], /--note needs a text/],
    [["5", "--memo", "x"], /unknown option --memo/],
  ])("refuses %j", (args, message) => {
    expect(() => parseCredit(args)).toThrow(message);
  });
});
