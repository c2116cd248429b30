package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/clawconnect/clawconnect/taskapi"
)

// ResourceServer turns on OAuth mode (Options.OAuth): /mcp, /metrics and
// the pages accept access tokens of the operator's authorization server,
// and /.well-known/oauth-protected-resource tells clients where to get one
// (RFC 9728). Hosts such as Claude and ChatGPT then run the sign-in
// themselves.
type ResourceServer struct {
	// Verifier checks access tokens. Required.
	Verifier TokenVerifier
	// Resource is the canonical URL of /mcp as clients reach it
	// ("https://mcp.example.com/mcp"): the resource of the metadata, and
	// where the metadata's own URL is derived from. Required.
	Resource string
	// AuthorizationServers are the issuers the metadata names. Required.
	AuthorizationServers []string
	// Scopes are the scopes a token must carry: listed as
	// scopes_supported and in every challenge.
	Scopes []string
	// NoStaticTokens refuses the credentials of Options.Auth (personal
	// tokens, the shared password). Off, they keep working beside access
	// tokens.
	NoStaticTokens bool
}

// TokenVerifier checks an access token. It is called for every request
// that presents a bearer token not accepted otherwise, so it must be safe
// for concurrent use and cheap on a hit.
type TokenVerifier interface {
	// VerifyToken returns the identity the token acts as. A token to refuse
	// gives a *TokenError; any other error means the verifier could not
	// decide (its issuer unreachable), answered 503.
	VerifyToken(ctx context.Context, token string) (taskapi.Identity, error)
}

// The error codes of a TokenError (RFC 6750 §3.1).
const (
	// ErrorInvalidToken: expired, forged, for another issuer or audience;
	// answered 401.
	ErrorInvalidToken = "invalid_token"
	// ErrorInsufficientScope: a valid token that may not do this;
	// answered 403.
	ErrorInsufficientScope = "insufficient_scope"
)

// TokenError is the refusal of a bearer token, or of a request without
// one (Code ""). It wraps ErrBadCredential.
type TokenError struct {
	// Code is ErrorInvalidToken, ErrorInsufficientScope, or "" when the
	// request carried no token at all.
	Code string
	// Description says why, for a person; never the token.
	Description string
}

func (e *TokenError) Error() string {
	if e.Code == "" {
		return "no access token: " + e.Description
	}
	return e.Code + ": " + e.Description
}

// Unwrap returns ErrBadCredential.
func (e *TokenError) Unwrap() error { return ErrBadCredential }

// status is the HTTP status of the refusal.
func (e *TokenError) status() int {
	if e.Code == ErrorInsufficientScope {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// ErrVerifierUnavailable wraps a TokenVerifier's error that is not a
// refusal.
var ErrVerifierUnavailable = errors.New("the authorization server could not be asked")

// verifyTimeout bounds one token check when the caller's request gives no
// deadline (the dashboard re-checking a session).
const verifyTimeout = 15 * time.Second

// wellKnownPRM is the well-known path of protected resource metadata.
const wellKnownPRM = "/.well-known/oauth-protected-resource"

// resource is the checked ResourceServer with its derived URLs.
type resource struct {
	ResourceServer
	metadataURL string // the path-suffixed form, named in challenges
	suffixPath  string // its path on this server; "" when the resource has no path
	scopeList   string
}

func newResource(rs *ResourceServer) (*resource, error) {
	if rs.Verifier == nil {
		return nil, errors.New("server: ResourceServer.Verifier is required")
	}
	u, err := url.Parse(rs.Resource)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("server: ResourceServer.Resource %q is not an absolute http(s) URL without query or fragment", rs.Resource)
	}
	if len(rs.AuthorizationServers) == 0 {
		return nil, errors.New("server: ResourceServer.AuthorizationServers is required")
	}
	r := &resource{ResourceServer: *rs, scopeList: strings.Join(rs.Scopes, " ")}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	r.metadataURL = u.Scheme + "://" + u.Host + wellKnownPRM + path
	if path != "" {
		r.suffixPath = wellKnownPRM + path
	}
	return r, nil
}

// metadataHandler serves the protected resource metadata (RFC 9728 §3.2).
func (r *resource) metadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               r.Resource,
		AuthorizationServers:   r.AuthorizationServers,
		ScopesSupported:        r.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "ClawConnect",
	})
}

// verify checks a bearer token in OAuth mode: a static credential first
// (unless turned off), then the verifier.
func (s *Server) verify(ctx context.Context, pass, bearer string) (taskapi.Identity, error) {
	rs := s.oauth
	if !rs.NoStaticTokens && s.auth.Required() && (pass != "" || bearer != "") {
		if id, ok := s.auth.Authenticate(pass, bearer); ok {
			return id, nil
		}
	}
	if bearer == "" {
		why := "send an access token from the authorization server as Authorization: Bearer"
		if pass != "" {
			why = "the ?pass= credential was not accepted; " + why
		}
		return taskapi.Identity{}, &TokenError{Description: why}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, verifyTimeout)
		defer cancel()
	}
	id, err := rs.Verifier.VerifyToken(ctx, bearer)
	if te := (*TokenError)(nil); errors.As(err, &te) {
		return taskapi.Identity{}, te
	}
	if err != nil {
		return taskapi.Identity{}, fmt.Errorf("%w: %w", ErrVerifierUnavailable, err)
	}
	if id.User == "" {
		return taskapi.Identity{}, &TokenError{Code: ErrorInvalidToken, Description: "the token names no user"}
	}
	return id, nil
}

// unavailableBody answers a request whose token could not be checked.
const unavailableBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Service unavailable: the authorization server could not be reached to check the token; retry shortly"}}`

// refuseToken writes the answer to a refused bearer token: the status of
// its code, a Bearer challenge naming the metadata (and the scopes), and
// a JSON-RPC error body saying why.
func (s *Server) refuseToken(w http.ResponseWriter, te *TokenError) {
	h := w.Header()
	desc := te.Description
	if te.Code == "" {
		desc = "" // RFC 6750 §3.1: no error information for a request without a token
	}
	h.Set("WWW-Authenticate", BearerChallenge(s.oauth.metadataURL, te.Code, desc, s.oauth.scopeList))
	h.Set("Content-Type", "application/json")
	w.WriteHeader(te.status())
	msg := "Unauthorized: " + te.Description
	if te.Code == ErrorInsufficientScope {
		msg = "Forbidden: " + te.Description
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32001, "message": msg}})
	_, _ = w.Write(body)
}

// BearerChallenge renders a WWW-Authenticate value for the Bearer scheme
// (RFC 6750 §3, RFC 9728 §5.1): resource_metadata, then error,
// error_description and scope, each left out when empty. Every value is
// cut down to the characters RFC 6750 allows in them (printable ASCII
// but '"' and '\', which become "'" and '/'), so nothing a token or a
// setting holds can break the header or smuggle another parameter in.
func BearerChallenge(metadataURL, code, description, scope string) string {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	for _, p := range [][2]string{{"resource_metadata", metadataURL}, {"error", code}, {"error_description", description}, {"scope", scope}} {
		v := challengeValue(p[1])
		if v == "" {
			continue
		}
		b.WriteString(sep)
		b.WriteString(p[0])
		b.WriteString(`="`)
		b.WriteString(v)
		b.WriteString(`"`)
		sep = ", "
	}
	return b.String()
}

// challengeValue keeps the characters of v allowed in a challenge value
// (%x20-21 / %x23-5B / %x5D-7E), turns '"' into "'", '\' into '/' and
// others into '?', and bounds it.
func challengeValue(v string) string {
	const maxValue = 512
	var b strings.Builder
	for i := 0; i < len(v) && b.Len() < maxValue; i++ {
		c := v[i]
		switch {
		case c == '"':
			b.WriteByte('\'')
		case c == '\\':
			b.WriteByte('/')
		case c >= 0x20 && c <= 0x7e:
			b.WriteByte(c)
		case c >= 0x80:
			// One '?' per UTF-8 sequence, not per byte.
			if c >= 0xc0 {
				b.WriteByte('?')
			}
		default:
			b.WriteByte('?')
		}
	}
	return strings.TrimSpace(b.String())
}
