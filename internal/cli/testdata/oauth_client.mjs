// A real MCP client signing in by OAuth: the TypeScript SDK's own
// authorization support against `clawconnect serve` in OAuth mode.
//
//   node oauth_client.mjs <server /mcp URL> <user> <password> <redirect URI> <client id> [<client secret>]
//
// The SDK meets the 401, reads the resource metadata the challenge names,
// discovers the authorization server, and sends the "browser" to its
// authorization endpoint with PKCE; this script plays the browser (it
// posts the provider's login form) and hands the code back, the SDK gets
// the token, and the call is made again. It prints one JSON object: every
// request the SDK made (method and path), the scopes granted, and the
// run_task answer.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [serverUrl, user, password, redirectUrl, clientId, clientSecret] = process.argv.slice(2);
const requests = [];
const logged = (url, init) => {
  const u = new URL(url instanceof Request ? url.url : url);
  requests.push(`${init?.method ?? "GET"} ${u.host === new URL(serverUrl).host ? "serve" : "provider"} ${u.pathname}`);
  return fetch(url, init);
};

// signIn follows the provider's redirects, posting the login form, until
// it redirects to redirectUrl, and returns the code.
async function signIn(start) {
  let url = new URL(start);
  for (let i = 0; i < 20; i++) {
    if (url.href.startsWith(redirectUrl)) {
      return url.searchParams.get("code");
    }
    let res = await fetch(url, { redirect: "manual" });
    if (res.status === 200 && url.pathname === "/login/username") {
      const form = new URLSearchParams({ id: url.searchParams.get("authRequestID"), username: user, password });
      res = await fetch(new URL("/login/username", url), { method: "POST", body: form, redirect: "manual" });
    }
    const loc = res.headers.get("location");
    if (!loc) throw new Error(`sign-in stopped at ${url.pathname} with ${res.status}: ${await res.text()}`);
    url = new URL(loc, url);
  }
  throw new Error("too many redirects");
}

let verifier, tokens, code;
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return { client_name: "clawconnect-oauth-e2e", redirect_uris: [redirectUrl], grant_types: ["authorization_code"],
      response_types: ["code"], token_endpoint_auth_method: clientSecret ? "client_secret_basic" : "none" };
  },
  clientInformation() { return clientSecret ? { client_id: clientId, client_secret: clientSecret } : { client_id: clientId }; },
  tokens() { return tokens; },
  saveTokens(t) { tokens = t; },
  saveCodeVerifier(v) { verifier = v; },
  codeVerifier() { return verifier; },
  async redirectToAuthorization(url) {
    requests.push(`BROWSER provider ${url.pathname} code_challenge_method=${url.searchParams.get("code_challenge_method")} scope=${url.searchParams.get("scope")} resource=${url.searchParams.get("resource")}`);
    code = await signIn(url);
  },
};

const connect = () => {
  const client = new Client({ name: "clawconnect-oauth-e2e", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider, fetch: logged });
  return { client, transport };
};

let { client, transport } = connect();
try {
  await client.connect(transport);
  throw new Error("serve let the client in without a token");
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
await transport.finishAuth(code);
({ client, transport } = connect());
await client.connect(transport);
const res = await client.callTool({ name: "run_task", arguments: { task: "from the TypeScript SDK" } });
console.log(JSON.stringify({ requests, scope: tokens?.scope ?? "", isError: res.isError ?? false, jobId: res.structuredContent?.jobId ?? "" }));
await client.close();
