// Drive an MCP server with an official TypeScript SDK client and print what it saw.
//
//     node client.mjs --url http://127.0.0.1:PORT/mcp --token TOKEN --plan plan.json [--sdk v1|v2]
//                     [--negotiation legacy|auto|2026-07-28]
//
// --sdk v1 (default): @modelcontextprotocol/sdk 1.x, the client most desktop and IDE agents are built on; it
// knows only the initialize handshake (2025-11-25 at newest). --sdk v2: @modelcontextprotocol/client 2.x, whose
// --negotiation auto probes with server/discover and a version pins the 2026-07-28 era (no initialize).
//
// The packages are resolved from the folder named by BTP_NODE_MODULES (tests/node_tools.py installs them there;
// an ES module ignores NODE_PATH, so the script resolves through createRequire and loads each package's own
// CommonJS build: one build for Client and transport alike). The plan is a JSON list of steps, each run
// whatever the previous one answered (the test prepares ids and versions in the database beforehand):
//
//     {"tool": "get_trip", "arguments": {"id": "..."}}
//
// Every call goes through the SDK's own `callTool`, which validates structuredContent against the tool's
// outputSchema (cached by listTools) and throws "Structured content does not match the tool's output schema"
// on a mismatch; such a throw is recorded as the step's `threw`, never swallowed.
//
// Prints ONE JSON document on stdout and exits 0:
//
//     {"sdk", "sdkVersion", "protocolVersion", "protocolEra", "serverInfo", "tools": [names],
//      "outputSchemas": [names], "results": [{"step", "tool", "isError", "structuredContent", "text", "threw"}],
//      "control": {"refusalShapeValid", "errorMessage"},
//      "http": [{"method", "mcpMethod", "status", "contentType", "protocolVersionHeader", "mcpHeaders"}]}
//
// `control` validates the refusal shape {error: {code, message}} against get_trip's outputSchema with the
// SDK's own validator: it must be invalid, which is why a refusal carries no structuredContent (were it sent,
// SDK 1.x's callTool would throw). On a failure outside a step it prints {"error": message, ...} and exits 1.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const CLIENT_INFO = { name: "btp-ts-sdk-test", version: "1.0.0" };
const REQUEST_TIMEOUT_MS = 30000;

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) {
      throw new Error(`usage: client.mjs --url URL --token TOKEN --plan FILE (bad argument ${argv[i]})`);
    }
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const name of ["url", "token", "plan"]) {
    if (!args[name]) throw new Error(`--${name} is required`);
  }
  args.sdk ??= "v1";
  args.negotiation ??= "legacy";
  if (!["v1", "v2"].includes(args.sdk)) throw new Error(`--sdk must be v1 or v2, not ${args.sdk}`);
  if (args.sdk === "v1" && args.negotiation !== "legacy") throw new Error("SDK 1.x has no version negotiation");
  return args;
}

function loadSdk(which) {
  const folder = process.env.BTP_NODE_MODULES;
  if (!folder) throw new Error("BTP_NODE_MODULES (the node_modules holding the MCP SDKs) is not set");
  const require = createRequire(path.join(folder, "resolver.cjs"));
  // The packages' exports maps send "./package.json" to a build folder's stub (or nowhere): read the root's own.
  const version = (name) => JSON.parse(readFileSync(path.join(folder, name, "package.json"), "utf8")).version;
  if (which === "v2") {
    const client = require("@modelcontextprotocol/client");
    return {
      version: version("@modelcontextprotocol/client"), Client: client.Client,
      StreamableHTTPClientTransport: client.StreamableHTTPClientTransport,
      AjvJsonSchemaValidator: require("@modelcontextprotocol/client/validators/ajv").AjvJsonSchemaValidator,
    };
  }
  return {
    version: version("@modelcontextprotocol/sdk"),
    Client: require("@modelcontextprotocol/sdk/client/index.js").Client,
    StreamableHTTPClientTransport: require("@modelcontextprotocol/sdk/client/streamableHttp.js")
      .StreamableHTTPClientTransport,
    AjvJsonSchemaValidator: require("@modelcontextprotocol/sdk/validation/ajv").AjvJsonSchemaValidator,
  };
}

function clientOptions(args) {
  if (args.sdk === "v1") return { capabilities: {} };
  const mode = args.negotiation === "legacy" || args.negotiation === "auto" ? args.negotiation
    : { pin: args.negotiation };
  return { capabilities: {}, versionNegotiation: { mode } };
}

// Every HTTP exchange the SDK makes: a strict client's complaint about a status, a content type or a header
// is then visible next to the request that caused it.
function recordingFetch(http) {
  return async (url, init = {}) => {
    const headers = new Headers(init.headers);
    let mcpMethod = null;
    if (typeof init.body === "string") {
      try {
        const body = JSON.parse(init.body);
        mcpMethod = Array.isArray(body) ? body.map((m) => m.method) : (body.method ?? null);
      } catch {
        mcpMethod = "(not JSON)";
      }
    }
    const response = await fetch(url, init);
    http.push({
      method: init.method ?? "GET", mcpMethod, status: response.status,
      contentType: response.headers.get("content-type"),
      protocolVersionHeader: headers.get("mcp-protocol-version"),
      // 2026-07-28 request headers (Mcp-Method, Mcp-Name, Mcp-Param-*): what the modern leg mirrored.
      mcpHeaders: Object.fromEntries([...headers].filter(([k]) => k.startsWith("mcp-") && k !== "mcp-protocol-version")),
    });
    return response;
  };
}

function textOf(result) {
  const block = (result.content ?? []).find((c) => c.type === "text");
  return block ? block.text : null;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const plan = JSON.parse(readFileSync(args.plan, "utf8"));
  const sdk = loadSdk(args.sdk);
  const report = { sdk: args.sdk, sdkVersion: sdk.version, results: [], http: [] };
  const transport = new sdk.StreamableHTTPClientTransport(new URL(args.url), {
    requestInit: { headers: { Authorization: `Bearer ${args.token}` } },
    fetch: recordingFetch(report.http),
  });
  const client = new sdk.Client(CLIENT_INFO, clientOptions(args));
  try {
    await client.connect(transport, { timeout: REQUEST_TIMEOUT_MS });
    report.protocolVersion = (client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion) ?? null;
    report.protocolEra = client.getProtocolEra?.() ?? "legacy";  // SDK 1.x knows no other era
    report.serverInfo = client.getServerVersion() ?? null;
    const listed = await client.listTools({}, { timeout: REQUEST_TIMEOUT_MS });
    report.tools = listed.tools.map((t) => t.name);
    report.outputSchemas = listed.tools.filter((t) => t.outputSchema).map((t) => t.name);

    const getTrip = listed.tools.find((t) => t.name === "get_trip");
    if (getTrip?.outputSchema) {
      const check = new sdk.AjvJsonSchemaValidator().getValidator(getTrip.outputSchema)(
        { error: { code: "not_found", message: "Trip not found." } });
      report.control = { refusalShapeValid: check.valid, errorMessage: check.errorMessage ?? null };
    }

    for (const [index, step] of plan.entries()) {
      const entry = { step: index, tool: step.tool };
      try {
        const params = { name: step.tool, arguments: step.arguments ?? {} };
        const options = { timeout: REQUEST_TIMEOUT_MS };
        const result = args.sdk === "v1" ? await client.callTool(params, undefined, options)
          : await client.callTool(params, options);
        Object.assign(entry, {
          isError: result.isError === true, structuredContent: result.structuredContent ?? null,
          text: textOf(result), threw: null,
        });
      } catch (error) {
        Object.assign(entry, { threw: String(error?.message ?? error) });
      }
      report.results.push(entry);
    }
    await client.close();
    process.stdout.write(JSON.stringify(report) + "\n");
  } catch (error) {
    report.error = String(error?.stack ?? error);
    await client.close().catch(() => {});
    process.stdout.write(JSON.stringify(report) + "\n");
    process.exitCode = 1;
  }
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error?.stack ?? error) }) + "\n");
  process.exitCode = 1;
});
