/**
 * Sidecar entry point: `bun sidecar/main.ts`, one process per GPU host. Settings: sidecar/settings.ts;
 * what the process runs, and its signals: sidecar/start.ts.
 */
import { runSidecar } from "./start.ts";

runSidecar();
