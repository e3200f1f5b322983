/**
 * A deployment's address as the client and the svc tools accept it: https, or http to a loopback host
 * (contract/urls.ts), with no credentials, query, fragment or `/v1/...` route, and no trailing slash.
 *
 *     normalizeBaseUrl("https://decisions.example.com/", "SVC_BASE_URL");   // "https://decisions.example.com"
 */
import { checkServiceUrl } from "../../../contract/urls.ts";
import { ConfigurationError } from "./errors.ts";

/** The address, or a ConfigurationError whose message names `what` (where the value came from). */
export function normalizeBaseUrl(raw: string, what: string): string {
  let url: URL;
  try {
    url = checkServiceUrl(raw, what);
  } catch (err) {
    throw new ConfigurationError((err as Error).message);
  }
  if (url.username || url.password || url.search || url.hash) {
    throw new ConfigurationError(`${what} URL must not hold credentials, a query or a fragment: the API key is a setting of its own`);
  }
  const path = url.pathname.replace(/\/+$/, "");
  const route = /\/v1(\/.*)?$/;
  if (route.test(path)) throw new ConfigurationError(`${what} URL is the service's address without /v1/...: use ${url.origin}${path.replace(route, "")}`);
  return `${url.origin}${path}`;
}
