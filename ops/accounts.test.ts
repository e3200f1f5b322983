import { describe, expect, it } from "vitest";
import { parseSettings } from "./accounts.ts";

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
