/**
 * `svc-mcp`: the decision service's MCP server over stdio (runs in a user's MCP host, on Node 20 or
 * later). Standard output carries the protocol and nothing else; every log line goes to standard
 * error, and never a key, a token or a request's content.
 *
 *     { "mcpServers": { "decisions": { "command": "svc-mcp", "env": { "SVC_BASE_URL": "https://..." } } } }
 *
 * It starts without a key: the tools read the credentials at each call (tools.ts).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { VERSION } from "../../sdk-ts/src/index.ts";
import { callTool, isTool, TOOLS } from "./tools.ts";

// Anything a dependency prints must not corrupt the protocol stream.
console.log = console.error;
console.info = console.error;
console.debug = console.error;

if (process.argv.includes("--help") || process.argv.includes("-h")) {
  process.stderr.write(
    [
      `svc-mcp ${VERSION}: the decision service's MCP server over stdio, with the tools list_models and decide.`,
      "Run it from an MCP host. Settings: SVC_API_KEY, SVC_BASE_URL, SVC_DEFAULT_MODEL, SVC_CONFIG_PATH,",
      "or the key and address saved by `svc login --api-key`.",
      "",
    ].join("\n"),
  );
  process.exit(0);
}

// The low-level server: the tools publish the input and output schemas the contract's converter
// writes (tools.ts), which McpServer's own converter cannot produce from the contract's custom and
// map schemas; the arguments are checked with the contract's zod schemas in callTool.
const server = new Server({ name: "decision-service", version: VERSION }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  const { name, arguments: args } = request.params;
  if (!isTool(name)) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${JSON.stringify(name.slice(0, 40))}; the tools are ${TOOLS.map((tool) => tool.name).join(" and ")}`);
  return callTool(name, args, process.env, extra.signal);
});
server.onerror = (err) => console.error(`svc-mcp: ${err.message}`);

await server.connect(new StdioServerTransport());
console.error(`svc-mcp ${VERSION} ready on stdio`);
