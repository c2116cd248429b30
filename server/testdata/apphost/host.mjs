// A minimal MCP Apps host for the task center's browser test, built on the
// official host bridge (@modelcontextprotocol/ext-apps/app-bridge) and the
// TypeScript SDK's client over streamable HTTP. It declares MCP Apps at
// initialize, finds the app through run_task's _meta.ui.resourceUri, reads
// it, renders it in a sandboxed iframe under the CSP its _meta.ui.csp
// declares (the rule of the MCP Apps spec), relays the app's tool calls to
// the server, then calls the tool named in the page's query and hands the
// app the input and the result. What it sees is kept in window.host for
// the test to read.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const MIME = "text/html;profile=mcp-app";
const q = new URLSearchParams(location.search);
const host = (window.host = { state: "starting", loads: 0, calls: [], contexts: [], messages: [], errors: [] });
let settle;
host.done = new Promise((r) => { settle = r; });

const themes = {
  light: { "--color-background-primary": "#ffffff", "--color-text-primary": "#1f2328", "--font-sans": "system-ui, sans-serif" },
  dark: { "--color-background-primary": "#0d1117", "--color-background-secondary": "#161b22", "--color-text-primary": "#e6edf3",
    "--color-text-secondary": "#9198a1", "--color-border-primary": "#30363d", "--font-sans": "system-ui, sans-serif" },
};

function cspOf(csp) {
  const res = (csp.resourceDomains || []).join(" ");
  return [
    "default-src 'none'",
    "script-src 'self' 'unsafe-inline' " + res,
    "style-src 'self' 'unsafe-inline' " + res,
    "connect-src 'self' " + (csp.connectDomains || []).join(" "),
    "img-src 'self' data: " + res,
    "font-src 'self' " + res,
    "media-src 'self' data: " + res,
    "frame-src " + ((csp.frameDomains || []).join(" ") || "'none'"),
    "object-src 'none'",
    "base-uri " + ((csp.baseUriDomains || []).join(" ") || "'self'"),
  ].join("; ");
}

async function main() {
  const theme = q.get("theme") || "light";
  document.documentElement.style.background = theme === "dark" ? "#010409" : "#f6f8fa";
  const client = new Client({ name: "apps-test-host", version: "1" },
    { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [MIME] } } } });
  const transport = new StreamableHTTPClientTransport(new URL(q.get("mcp")));
  host.step = "connect";
  await client.connect(transport);
  host.sessionId = transport.sessionId;
  host.protocol = transport.protocolVersion;

  host.step = "tools/list";
  const { tools } = await client.listTools();
  host.toolMeta = Object.fromEntries(tools.map((t) => [t.name, t._meta || null]));
  const tool = q.get("tool") || "run_task";
  const uri = host.toolMeta[tool]?.ui?.resourceUri;
  if (!uri) throw new Error(tool + " has no _meta.ui.resourceUri");
  const { contents } = await client.readResource({ uri });
  const content = contents[0];
  if (content.mimeType !== MIME) throw new Error("resource MIME type " + content.mimeType);
  host.csp = cspOf(content._meta?.ui?.csp || {});
  const html = content.text.replace("<head>", '<head><meta http-equiv="Content-Security-Policy" content="' + host.csp + '">');

  // The bridge listens before the app's document loads: the app sends
  // ui/initialize as soon as its script runs.
  const iframe = document.createElement("iframe");
  iframe.id = "app";
  iframe.setAttribute("sandbox", "allow-scripts");
  document.getElementById("frame").append(iframe);
  const bridge = new AppBridge(null, { name: "apps-test-host", version: "1" },
    { serverTools: {}, updateModelContext: { text: {} }, message: { text: {} }, logging: {} },
    { hostContext: { theme, styles: { variables: themes[theme] }, displayMode: "inline", platform: "web" } });
  bridge.oncalltool = async (params) => {
    host.calls.push(params.name);
    return client.callTool(params);
  };
  bridge.onreadresource = async (params) => client.readResource(params);
  bridge.onupdatemodelcontext = async (params) => { host.contexts.push(params); return {}; };
  bridge.onmessage = async (params) => { host.messages.push(params); return {}; };
  bridge.onsizechange = ({ height }) => { if (height) iframe.style.height = height + "px"; };
  const initialized = new Promise((r) => { bridge.oninitialized = r; });
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.addEventListener("load", () => { host.loads++; });
  iframe.srcdoc = html;
  host.step = "app initialize";
  await initialized;

  const args = JSON.parse(q.get("args") || "{}");
  await bridge.sendToolInput({ arguments: args });
  host.step = "tools/call";
  const result = await client.callTool({ name: tool, arguments: args });
  host.result = result;
  await bridge.sendToolResult(result);
  host.state = "rendered";
}

main().catch((e) => { host.state = "failed"; host.errors.push(String(e && e.stack || e)); })
  .finally(() => settle(host.state));
