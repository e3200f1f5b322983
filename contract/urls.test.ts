import { describe, expect, it } from "vitest";
import { checkServiceUrl, isLoopbackHost } from "./urls.ts";

describe("checkServiceUrl", () => {
  it("accepts https anywhere", () => {
    expect(checkServiceUrl("https://gpu-1.example.com:8443/", "runtime").host).toBe("gpu-1.example.com:8443");
  });

  it("accepts plaintext http on loopback only", () => {
    for (const url of ["http://127.0.0.1:9000", "http://localhost:1", "http://[::1]:80", "http://127.8.9.10"]) {
      expect(checkServiceUrl(url, "runtime").protocol).toBe("http:");
    }
  });

  it("refuses plaintext http to a remote host, naming what it refused", () => {
    expect(() => checkServiceUrl("http://10.0.0.5:9000", "runtime")).toThrow(/runtime URL uses plaintext http:\/\/ to a remote host/);
    expect(() => checkServiceUrl("http://localhost.evil.com", "sidecar")).toThrow(/sidecar URL/);
    expect(() => checkServiceUrl("http://127.0.0.1.nip.io", "runtime")).toThrow(/plaintext/);
  });

  it("refuses other schemes and garbage", () => {
    expect(() => checkServiceUrl("ftp://127.0.0.1", "runtime")).toThrow(/must use https/);
    expect(() => checkServiceUrl("not a url", "runtime")).toThrow(/not a valid URL/);
  });

  it("recognises loopback names", () => {
    expect(isLoopbackHost("127.0.0.1")).toBe(true);
    expect(isLoopbackHost("128.0.0.1")).toBe(false);
  });
});
