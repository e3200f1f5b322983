import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "contract/**/*.test.ts", "server-shared/**/*.test.ts", "edge/**/*.test.ts", "sidecar/**/*.test.ts", "runtime/**/*.test.ts", "local/**/*.test.ts", "ops/**/*.test.ts", "bench/**/*.test.ts"],
    // One isolated stack shared by the API tests; its logs are scanned for secrets at the end.
    globalSetup: ["test/support/global-stack.ts"],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    // Integration files start real processes; two cores run them one file at a time.
    fileParallelism: false,
    pool: "forks",
  },
});
