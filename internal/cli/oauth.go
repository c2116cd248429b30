package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/internal/oauth"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/server"
)

// oauthConfig is what the OAuth settings make of serve: the validator's
// options, the resource server and the dashboard's sign-in (each without
// the parts built at start, the verifier and the endpoints).
type oauthConfig struct {
	On          bool
	Validator   oauth.Options
	Resource    server.ResourceServer
	NoPassParam bool
	SignIn      dashboard.OAuthSignIn
}

// oauthFrom reads the OAuth settings. OAuth mode is on when
// CLAWCONNECT_OAUTH_ISSUER is set.
func oauthFrom(sv settings.Values) oauthConfig {
	c := oauthConfig{On: sv.OAuthIssuer != ""}
	auds := append([]string(nil), sv.OAuthAudiences...)
	if sv.OAuthResource != "" && !slices.Contains(auds, sv.OAuthResource) {
		auds = append([]string{sv.OAuthResource}, auds...)
	}
	c.Validator = oauth.Options{
		Issuer: sv.OAuthIssuer, Audiences: auds, RequiredScopes: sv.OAuthScopes,
		UserClaim: sv.OAuthUserClaim, GroupsClaim: sv.OAuthGroupsClaim, AllowedGroups: sv.OAuthAllowedGroups,
		Introspect: sv.OAuthIntrospect, ClientID: sv.OAuthClientID, ClientSecret: sv.OAuthClientSecret,
		ClockSkew: sv.OAuthClockSkew,
	}
	c.Resource = server.ResourceServer{Resource: sv.OAuthResource, Scopes: sv.OAuthScopes, NoStaticTokens: !sv.OAuthStaticTokens}
	if sv.OAuthIssuer != "" {
		c.Resource.AuthorizationServers = []string{sv.OAuthIssuer}
	}
	c.NoPassParam = c.On
	if sv.PassParam != nil {
		c.NoPassParam = !*sv.PassParam
	}
	scopes := sv.OAuthScopes
	if !slices.Contains(scopes, "openid") {
		scopes = append([]string{"openid"}, scopes...)
	}
	c.SignIn = dashboard.OAuthSignIn{ClientID: sv.OAuthClientID, ClientSecret: sv.OAuthClientSecret, Resource: sv.OAuthResource,
		RedirectURL: callbackURL(sv.OAuthResource), Scopes: scopes}
	return c
}

// callbackURL is the dashboard's redirect URI: /oauth/callback at the
// origin of the resource URL.
func callbackURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host + "/oauth/callback"
}

// errOAuthResource is the configuration error of OAuth mode without a
// resource URL.
var errOAuthResource = errors.New("CLAWCONNECT_OAUTH_ISSUER is set but CLAWCONNECT_OAUTH_RESOURCE is not: give the canonical URL of /mcp as clients reach it, e.g. https://mcp.example.com/mcp")

// build makes the validator, and sets it as the resource server's
// verifier and the sign-in's source of endpoints. The sign-in is nil
// without a client id.
func (c oauthConfig) build(logger *slog.Logger) (*oauth.Validator, *server.ResourceServer, *dashboard.OAuthSignIn, error) {
	if c.Resource.Resource == "" {
		return nil, nil, nil, errOAuthResource
	}
	vo := c.Validator
	vo.Logger = logger
	v, err := oauth.New(vo)
	if err != nil {
		return nil, nil, nil, err
	}
	rs := c.Resource
	rs.Verifier = v
	if c.SignIn.ClientID == "" {
		return v, &rs, nil, nil
	}
	si := c.SignIn
	si.Endpoints = func(ctx context.Context) (string, string, error) {
		m, err := v.Discover(ctx)
		if err != nil {
			return "", "", err
		}
		if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
			return "", "", fmt.Errorf("the issuer's metadata lacks authorization_endpoint or token_endpoint")
		}
		return m.AuthorizationEndpoint, m.TokenEndpoint, nil
	}
	return v, &rs, &si, nil
}

// checkOAuth is doctor's verdict on OAuth mode: the issuer's metadata and
// keys can be fetched, and the resource is among the audiences accepted.
func checkOAuth(ctx context.Context, sv settings.Values) []verdict {
	c := oauthFrom(sv)
	if !c.On {
		return nil
	}
	const area = "oauth"
	v, rs, _, err := c.build(nil)
	if err != nil {
		return []verdict{{area: area, detail: err.Error(), fix: "Fix the CLAWCONNECT_OAUTH_* settings; serve refuses to start until then."}}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, keys, err := v.Check(ctx)
	if err != nil {
		return []verdict{{area: area, detail: err.Error(),
			fix: "Check that CLAWCONNECT_OAUTH_ISSUER is the issuer exactly as its /.well-known/openid-configuration (or oauth-authorization-server) names it, and that this machine reaches it."}}
	}
	var vs []verdict
	switch {
	case m.JWKSURI != "" && keys == 0:
		vs = append(vs, verdict{area: area, detail: "the issuer's key set at " + m.JWKSURI + " holds no public signing key",
			fix: "Check the provider's signing keys; no JWT access token can be verified until it publishes one."})
	case m.JWKSURI != "":
		vs = append(vs, verdict{ok: true, area: area, detail: fmt.Sprintf("issuer %s reachable; %d signing keys at %s", m.Issuer, keys, m.JWKSURI)})
	case c.Validator.Introspect:
		vs = append(vs, verdict{ok: true, area: area, detail: "issuer " + m.Issuer + " reachable; tokens checked by introspection at " + m.IntrospectionEndpoint})
	default:
		vs = append(vs, verdict{area: area, detail: "the issuer publishes no keys (jwks_uri) and introspection is off",
			fix: "Set CLAWCONNECT_OAUTH_INTROSPECT=1 with CLAWCONNECT_OAUTH_CLIENT_ID (and its secret) so opaque tokens can be checked."})
	}
	if c.Validator.Introspect && m.IntrospectionEndpoint == "" {
		vs = append(vs, verdict{area: area, detail: "CLAWCONNECT_OAUTH_INTROSPECT is on but the issuer lists no introspection_endpoint",
			fix: "Turn introspection off, or use a provider that offers it."})
	}
	vs = append(vs, verdict{ok: true, area: area, detail: "access tokens must name audience " + joinOr(c.Validator.Audiences) +
		" (the resource " + rs.Resource + " is always one); the provider must issue them for it (RFC 8707 resource, or its own audience setting)"})
	if c.SignIn.ClientID != "" && (m.AuthorizationEndpoint == "" || m.TokenEndpoint == "") {
		vs = append(vs, verdict{area: area, detail: "the issuer lists no authorization or token endpoint, so the dashboard cannot sign in through it",
			fix: "Unset CLAWCONNECT_OAUTH_CLIENT_ID to sign in to the dashboard with a token instead."})
	}
	return vs
}

// joinOr lists values as "a", "a or b", "a, b or c".
func joinOr(vals []string) string {
	switch len(vals) {
	case 0:
		return ""
	case 1:
		return vals[0]
	}
	out := ""
	for i, v := range vals[:len(vals)-1] {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out + " or " + vals[len(vals)-1]
}
