package realgateway

// The test plugin the harness loads from a local directory (no install):
// a manifest, a package.json naming the ESM entry, and the entry itself.
// register() runs more than once (startup phases, hot reload), so it only
// registers handlers.
const (
	pluginManifest = `{
  "id": "clawconnect-test",
  "name": "ClawConnect test plugin",
  "description": "Gateway methods for ClawConnect's end-to-end tests.",
  "categories": ["other"],
  "activation": {"onStartup": true},
  "configSchema": {"type": "object", "additionalProperties": false}
}
`
	pluginPackage = `{
  "name": "clawconnect-test-plugin",
  "version": "0.0.0",
  "private": true,
  "type": "module",
  "openclaw": {"extensions": ["./index.mjs"]}
}
`
	pluginSource = `// ClawConnect test plugin: gateway methods for end-to-end tests.
export default {
  id: "clawconnect-test",
  name: "ClawConnect test plugin",
  description: "Gateway methods for ClawConnect's end-to-end tests.",
  configSchema: { type: "object", additionalProperties: false },
  register(api) {
    api.registerGatewayMethod("clawconnect-test.echo", async ({ params, respond, client }) => {
      respond(true, { echo: params ?? null, client: client?.connect?.client ?? null });
    }, { scope: "operator.read" });
    api.registerGatewayMethod("clawconnect-test.fail", async ({ params, respond }) => {
      const message = typeof params?.message === "string" ? params.message : "scripted failure";
      respond(false, undefined, { code: "CLAWCONNECT_TEST_FAILED", message });
    }, { scope: "operator.read" });
  },
};
`
)
