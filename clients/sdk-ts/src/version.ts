/**
 * The version of this package, sent in the user agent, and of `svc` and `svc-mcp`, which bundle the
 * SDK and are released with it (tests keep the three package.json files equal to it).
 */
export const VERSION = "0.1.0";
