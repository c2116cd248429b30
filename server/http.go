package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/taskapi"
)

// forbiddenBody is the reference's answer to a request without a valid
// credential.
const forbiddenBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Forbidden: token required via ?pass= or Authorization: Bearer"}}`

// throttledBody answers a request from an address over its budget of
// refused credentials; %d is the seconds to wait.
const throttledBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Too many requests: too many refused tokens from this address; retry after %d s with a valid token"}}`

// ErrInsecureRemote is returned by ListenAndServe when asked to listen
// beyond loopback while no credential is configured.
var ErrInsecureRemote = errors.New("refusing to listen beyond loopback without authentication: set MCP_USER_TOKENS, MCP_USER_TOKENS_FILE or PUBLIC_MCP_PASS, or allow it explicitly")

// MaxRequestBytes bounds one HTTP request body on /mcp.
const MaxRequestBytes = 4 << 20

type ctxKey int

const connKey ctxKey = 0

// connParams is what the auth and scope layer decided for one request.
type connParams struct {
	scope    taskapi.Scope
	identity taskapi.Identity
}

// Handler returns the HTTP handler: /mcp (stateless streamable HTTP, with
// CORS and authentication), /metrics (authenticated like /mcp), /health and
// / (the pages set by SetPages, else a plain "OK"), every one behind the
// Host check (see withHost).
func (s *Server) Handler() http.Handler {
	return s.withHost(s.routes())
}

func (s *Server) routes() http.Handler {
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		p, ok := r.Context().Value(connKey).(connParams)
		if !ok {
			return nil
		}
		return s.mcpServer(p.scope, p.identity, appDeclared(r.Context()))
	}, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              s.logger,
		MaxRequestBodyBytes: MaxRequestBytes,
		// A client that goes away cancels its waiting check_task.
		PropagateRequestCancellation: true,
		// withHost makes the same check in front of every route, with the
		// operator's listed origins as well.
		DisableLocalhostProtection: true,
	})
	mux := http.NewServeMux()
	if s.oauth != nil {
		prm := s.oauth.metadataHandler()
		mux.Handle(wellKnownPRM, prm)
		if s.oauth.suffixPath != "" {
			mux.Handle(s.oauth.suffixPath, prm)
		}
	}
	mux.Handle("/mcp", s.withCORS(s.withAuth(withAppSession(s.withTaskListen(mcpHandler)))))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	// Metrics count tasks by status and agent: with auth on they need a
	// credential too (a scraper sends it as a Bearer token).
	mux.Handle("GET /metrics", s.withAuth(s.metrics.handler()))
	if s.pages != nil {
		mux.Handle("/", s.pages)
		return mux
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("OK"))
	})
	return mux
}

// withCORS refuses a request whose Origin is present and not allowed (403
// with no CORS headers, so the browser shows the page nothing), answers
// preflights with 204, and adds the CORS headers: the request's own origin
// when it sent one, and "*" for a request without Origin only when auth is
// required. An open server never sends a wildcard.
func (s *Server) withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		h := w.Header()
		h.Add("Vary", "Origin")
		if !s.origins.allow(origin, r) {
			s.logger.Warn("refused a cross-origin request", "origin", clipHeader(origin))
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(forbiddenOriginBody))
			return
		}
		switch {
		case origin != "":
			h.Set("Access-Control-Allow-Origin", origin)
		case s.authRequired():
			h.Set("Access-Control-Allow-Origin", "*")
		}
		h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, Mcp-Session-Id, Mcp-Protocol-Version, Authorization")
		h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, WWW-Authenticate")
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// clipHeader bounds a header value written to a log.
func clipHeader(v string) string {
	if len(v) > 200 {
		return v[:200] + "…"
	}
	return v
}

// withAuth authenticates the request and resolves its agent scope.
func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pass := s.QueryPass(r)
		var bearer string
		if v := r.Header.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			bearer = strings.TrimSpace(v[7:])
		}
		id, err := s.AuthenticateRequest(r, pass, bearer)
		if te := (*ThrottledError)(nil); errors.As(err, &te) {
			SetRetryAfter(w, te)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = fmt.Fprintf(w, throttledBody, retrySeconds(te.RetryAfter))
			return
		}
		if te := (*TokenError)(nil); errors.As(err, &te) && s.oauth != nil {
			s.refuseToken(w, te)
			return
		}
		if errors.Is(err, ErrVerifierUnavailable) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(unavailableBody))
			return
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(forbiddenBody))
			return
		}
		q := r.URL.Query()
		agents := append(q["agents"], q["agent"]...)
		scope, warnings := s.registry.Scope(q["group"], agents)
		for _, w := range warnings {
			s.logger.Warn("scope", "warning", w)
		}
		ctx := context.WithValue(r.Context(), connKey, connParams{scope: scope, identity: id})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// CheckListen returns ErrInsecureRemote when addr is not a loopback address
// and no credential is configured, unless Options.AllowUnauthenticatedRemote
// is set.
func (s *Server) CheckListen(addr string) error {
	if s.allowRem || s.authRequired() {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("check listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return ErrInsecureRemote
}

// ListenAndServe serves Handler on addr until ctx is cancelled, then shuts
// down gracefully, giving in-flight requests up to grace to finish. ready,
// when non-nil, receives the bound address once the listener is open. It
// returns nil after a clean shutdown.
func (s *Server) ListenAndServe(ctx context.Context, addr string, grace time.Duration, ready func(net.Addr)) error {
	if err := s.CheckListen(addr); err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	// Request contexts derive from base, which is cancelled when shutdown
	// starts, so waiting check_task calls return at once instead of holding
	// the shutdown for up to two minutes.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	lim := s.limits
	// With no credential to present, every connection is signed in from its
	// first byte, so only the total cap applies: a burst of local clients on
	// an open loopback serve is not turned away as if it were a flood.
	exempt := func(a netip.Addr) bool { return !s.authRequired() || s.trustedProxy(a) }
	ln = &capListener{Listener: ln, max: int64(lim.MaxConns), perAddr: lim.PreAuthPerAddress,
		exempt: exempt, preAuth: map[netip.Prefix]int{}}
	srv := &http.Server{
		ConnContext:       withConn,
		Handler:           withDeadlines(lim, s.Handler()),
		ReadHeaderTimeout: lim.ReadHeader,
		IdleTimeout:       lim.Idle,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	cancelBase()
	s.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	if shutdownErr != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown http: %w", shutdownErr)
	}
	return nil
}
