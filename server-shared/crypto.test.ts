import { describe, expect, it } from "vitest";
import { bearerToken, secretsEqual, sha256Hex } from "./crypto.ts";

describe("secretsEqual", () => {
  it("is true only for identical secrets", async () => {
    expect(await secretsEqual("s3cret-value", "s3cret-value")).toBe(true);
    expect(await secretsEqual("s3cret-value", "s3cret-valuf")).toBe(false);
    expect(await secretsEqual("s3cret-value", "s3cret")).toBe(false);
    expect(await secretsEqual("", "x")).toBe(false);
  });
});

describe("sha256Hex", () => {
  it("matches the known digest of 'abc'", async () => {
    expect(await sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});

describe("bearerToken", () => {
  it("extracts the token of a well-formed header only", () => {
    expect(bearerToken("Bearer abc.def")).toBe("abc.def");
    expect(bearerToken("bearer abc")).toBeNull();
    expect(bearerToken("Bearer ")).toBeNull();
    expect(bearerToken("Bearer a b")).toBeNull();
    expect(bearerToken(undefined)).toBeNull();
  });
});
