/**
 * Points the Neon driver at the local stack's bridge (local/neon-bridge.ts) instead of Neon's cloud.
 * Edge and sidecar call this with `NEON_LOCAL_BRIDGE` (`127.0.0.1:<port>`); in production the variable
 * is unset and the driver is left exactly as Neon configures it. Only a loopback bridge is accepted,
 * because the bridge speaks plaintext.
 */
import { neonConfig, type NeonConfig } from "@neondatabase/serverless";
import { checkServiceUrl } from "../contract/urls.ts";

export function useNeonLocalBridge(
  bridge: string | undefined,
  /** Only Node 20 needs one (it has no global WebSocket); workerd and Bun use their own. */
  webSocketConstructor?: NeonConfig["webSocketConstructor"],
): void {
  if (!bridge) return;
  const base = checkServiceUrl(`http://${bridge}`, "NEON_LOCAL_BRIDGE");
  if (base.protocol !== "http:") throw new Error("NEON_LOCAL_BRIDGE must be a loopback host:port");
  neonConfig.wsProxy = (host, port) => `${base.host}/v2?address=${host}:${port}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
  neonConfig.fetchEndpoint = `http://${base.host}/sql`;
  if (webSocketConstructor) neonConfig.webSocketConstructor = webSocketConstructor;
}
