/**
 * Transport policy for every outbound service URL (runtime, sidecar, storage, the CLI's base URL):
 * HTTPS anywhere, plain HTTP only to a loopback host.
 */
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK.has(hostname) || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/** Returns the parsed URL, or throws with a message naming `what` when the URL is not allowed. */
export function checkServiceUrl(raw: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`${what} URL is not a valid URL`);
  }
  if (url.protocol === "https:") return url;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return url;
  if (url.protocol === "http:") {
    throw new Error(`${what} URL uses plaintext http:// to a remote host (${url.hostname}); use https://`);
  }
  throw new Error(`${what} URL must use https:// (or http:// on loopback), got ${url.protocol}`);
}
