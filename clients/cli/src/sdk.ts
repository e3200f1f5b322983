/**
 * The one door to the TypeScript SDK (clients/sdk-ts), which makes every call to the service; the
 * build bundles it into the CLI and the MCP server, so neither depends on the SDK package.
 */
export * from "../../sdk-ts/src/index.ts";
