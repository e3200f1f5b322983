import { describe, expect, it } from "vitest";
import { SecretSource } from "../../server-shared/secrets.ts";
import { HttpRuntimeClient, runtimeClientFor } from "./client.ts";

describe("runtime client transport policy", () => {
  it("refuses a remote plaintext runtime URL, and accepts https and loopback http", () => {
    expect(() => new HttpRuntimeClient("http://gpu-7.internal:8080", "s")).toThrow(/plaintext http:\/\/ to a remote host/);
    expect(() => new HttpRuntimeClient("https://gpu-7.internal:8443", "s")).not.toThrow();
    expect(() => new HttpRuntimeClient("http://127.0.0.1:9000", "s")).not.toThrow();
  });

  it("reads the secret from the variable the registry entry names, and refuses when it is unset", () => {
    let refused: unknown;
    try {
      runtimeClientFor({ url: "https://gpu.example", token_env: "GPU_SECRET" }, new SecretSource({}));
    } catch (err) {
      refused = err;
    }
    expect(refused).toMatchObject({ status: 503, code: "unavailable", operatorNote: expect.stringMatching(/GPU_SECRET \(or GPU_SECRET_FILE\) is not set/) });
    expect(runtimeClientFor({ url: "https://gpu.example", token_env: "GPU_SECRET" }, new SecretSource({ GPU_SECRET: "x" }))).toBeInstanceOf(HttpRuntimeClient);
  });
});
