/** The version of the `svc` and `svc-mcp` packages (a test keeps it equal to both package.json files). */
export const VERSION = "0.1.0";
