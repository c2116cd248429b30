package config

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/taskapi"
)

// AuthOptions configures an Authenticator. The zero value means an open
// server (no credential required).
type AuthOptions struct {
	// UserTokens is MCP_USER_TOKENS: "Name:token,Name2:token2".
	UserTokens string
	// TokensFile is MCP_USER_TOKENS_FILE, a JSON file of personal tokens in
	// one of three shapes: {"Name":"token"}, {"tokens":{"Name":"token"}} or
	// [{"name":"Name","token":"token"}]. It is re-read when its modification
	// time or size changes.
	TokensFile string
	// PublicPass is PUBLIC_MCP_PASS, the legacy shared password.
	PublicPass string
	// Logger receives warnings (duplicate tokens, unreadable file); nil
	// discards them.
	Logger *slog.Logger
}

// AuthFrom takes MCP_USER_TOKENS, MCP_USER_TOKENS_FILE and PUBLIC_MCP_PASS
// from the effective settings.
func AuthFrom(v settings.Values) AuthOptions {
	return AuthOptions{UserTokens: v.UserTokens, TokensFile: v.TokensFile, PublicPass: v.PublicPass}
}

// UserToken is one personal credential: requests that present Token act as
// Name.
type UserToken struct {
	Name, Token string
}

// Authenticator checks HTTP credentials. It is safe for concurrent use.
//
// It fails closed: once any credential variable is set, every request needs
// a valid credential for the life of the process. A token file that
// disappears, stops parsing or yields no token leaves the last good set in
// force (and logs an error); it never opens the server.
type Authenticator struct {
	opts       AuthOptions
	logger     *slog.Logger
	env        []UserToken
	configured bool // some credential variable is set: auth is required

	mu         sync.Mutex
	fileStamp  fileStamp
	fileLoaded bool        // the file was looked at once
	fileTokens []UserToken // the last good set read from the file
	tokens     []UserToken // env tokens followed by file tokens, duplicates removed
}

type fileStamp struct {
	mod    time.Time
	size   int64
	exists bool
}

// MinTokenLength is the fewest characters a token or the shared password
// may have: a shorter one falls to guessing even under the sign-in backoff.
const MinTokenLength = 16

// ErrShortToken is wrapped by the error of NewAuthenticator for a token or
// password shorter than MinTokenLength.
var ErrShortToken = errors.New("token too short")

// checkLength refuses a credential shorter than MinTokenLength; what names
// it (never the token itself).
func checkLength(what, tok string) error {
	if n := len([]rune(tok)); n < MinTokenLength {
		return fmt.Errorf("%w: %s is %d characters; give at least %d random characters (e.g. the output of `openssl rand -hex 16`)",
			ErrShortToken, what, n, MinTokenLength)
	}
	return nil
}

// checkLengths refuses the first token of toks shorter than MinTokenLength,
// naming its entry as where says.
func checkLengths(toks []UserToken, where string) error {
	for _, t := range toks {
		if err := checkLength(fmt.Sprintf("the token of %s entry %q", where, t.Name), t.Token); err != nil {
			return err
		}
	}
	return nil
}

// NewAuthenticator builds an Authenticator and loads the token file once.
// It refuses a token or password shorter than MinTokenLength, in any of
// the three variables, with an error (wrapping ErrShortToken) that names
// the entry but not the token; a token file that cannot be read is only
// logged, as on every later re-read.
func NewAuthenticator(opts AuthOptions) (*Authenticator, error) {
	a := &Authenticator{opts: opts, logger: opts.Logger}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	for _, pair := range strings.Split(opts.UserTokens, ",") {
		name, tok, ok := strings.Cut(pair, ":")
		name, tok = strings.TrimSpace(name), strings.TrimSpace(tok)
		if !ok || name == "" || tok == "" {
			if strings.TrimSpace(pair) != "" {
				a.logger.Warn("MCP_USER_TOKENS entry is not Name:token; skipped")
			}
			continue
		}
		a.env = append(a.env, UserToken{Name: name, Token: tok})
	}
	if err := checkLengths(a.env, "MCP_USER_TOKENS"); err != nil {
		return nil, fmt.Errorf("check http credentials: %w", err)
	}
	if opts.PublicPass != "" {
		if err := checkLength("PUBLIC_MCP_PASS", opts.PublicPass); err != nil {
			return nil, fmt.Errorf("check http credentials: %w", err)
		}
	}
	a.configured = opts.PublicPass != "" || opts.TokensFile != "" || strings.TrimSpace(opts.UserTokens) != ""
	if strings.TrimSpace(opts.UserTokens) != "" && len(a.env) == 0 {
		a.logger.Error("MCP_USER_TOKENS is set but holds no Name:token entry; every HTTP request is refused until it does")
	}
	a.mu.Lock()
	err := a.refreshLocked()
	a.mu.Unlock()
	if errors.Is(err, ErrShortToken) {
		return nil, fmt.Errorf("check http credentials: %w", err)
	}
	return a, nil
}

// refreshLocked re-reads the token file when its stamp changed. A file
// that is missing, unreadable, malformed, empty or holds a short token
// keeps the last good set; the error says why.
func (a *Authenticator) refreshLocked() error {
	if a.opts.TokensFile == "" {
		if a.tokens == nil {
			a.merge()
		}
		return nil
	}
	st, err := os.Stat(a.opts.TokensFile)
	stamp := fileStamp{}
	if err == nil {
		stamp = fileStamp{mod: st.ModTime(), size: st.Size(), exists: true}
	}
	if a.fileLoaded && stamp == a.fileStamp {
		return nil
	}
	a.fileLoaded, a.fileStamp = true, stamp
	var toks []UserToken
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		err = errors.New("the file does not exist")
	case err == nil:
		var data []byte
		if data, err = os.ReadFile(a.opts.TokensFile); err == nil {
			toks, err = ParseTokensFile(data)
		}
		if err == nil && len(toks) == 0 {
			err = errors.New("the file holds no Name/token entry")
		}
		if err == nil {
			err = checkLengths(toks, "MCP_USER_TOKENS_FILE")
		}
	}
	if err != nil {
		a.logger.Error("MCP_USER_TOKENS_FILE is unusable; keeping the last good tokens (fix the file: a JSON object of name to token)",
			"path", a.opts.TokensFile, "err", err, "kept_tokens", len(a.fileTokens))
		if a.tokens == nil {
			a.merge()
		}
		return err
	}
	a.fileTokens = toks
	a.merge()
	return nil
}

// merge rebuilds tokens from the env tokens and the last good file tokens.
func (a *Authenticator) merge() {
	merged := make([]UserToken, 0, len(a.env)+len(a.fileTokens))
	seen := make(map[string]bool)
	for _, t := range append(append([]UserToken(nil), a.env...), a.fileTokens...) {
		if seen[t.Token] {
			a.logger.Warn("duplicate MCP user token skipped", "user", t.Name)
			continue
		}
		seen[t.Token] = true
		merged = append(merged, t)
	}
	a.tokens = merged
}

// Required reports whether any credential is configured; when false the
// server is open and every request is anonymous. It never changes over the
// life of the Authenticator.
func (a *Authenticator) Required() bool { return a.configured }

// Authenticate checks the ?pass= value first and then the bearer token. It
// returns the identity and true when the request may proceed: always when no
// credential is configured, otherwise when either value is a personal token
// (Identity.User set) or the PUBLIC_MCP_PASS (Identity.Legacy set).
func (a *Authenticator) Authenticate(pass, bearer string) (taskapi.Identity, bool) {
	if !a.configured {
		return taskapi.Identity{}, true
	}
	a.mu.Lock()
	_ = a.refreshLocked() // logged; the last good set stays
	tokens := a.tokens
	a.mu.Unlock()
	for _, cand := range []string{pass, bearer} {
		if cand == "" {
			continue
		}
		var user string
		for _, t := range tokens {
			if subtle.ConstantTimeCompare([]byte(cand), []byte(t.Token)) == 1 {
				user = t.Name
			}
		}
		if user != "" {
			return taskapi.Identity{User: user}, true
		}
		if a.opts.PublicPass != "" && subtle.ConstantTimeCompare([]byte(cand), []byte(a.opts.PublicPass)) == 1 {
			return taskapi.Identity{Legacy: true}, true
		}
	}
	return taskapi.Identity{}, false
}

// ParseTokensFile decodes an MCP_USER_TOKENS_FILE document in any of its
// three shapes. Entries with an empty name or token are skipped; the order is
// by name for the object shapes and file order for the array shape.
func ParseTokensFile(data []byte) ([]UserToken, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("parse tokens file: %w", err)
	}
	var out []UserToken
	add := func(name, tok any) {
		n, t := str(name), str(tok)
		if n != "" && t != "" {
			out = append(out, UserToken{Name: n, Token: t})
		}
	}
	switch doc := v.(type) {
	case []any:
		for _, e := range doc {
			if m, ok := e.(map[string]any); ok {
				add(m["name"], m["token"])
			}
		}
	case map[string]any:
		if inner, ok := doc["tokens"].(map[string]any); ok {
			doc = inner
		}
		for _, name := range sortedKeys(doc) {
			add(name, doc[name])
		}
	default:
		return nil, errors.New("parse tokens file: want an object or an array")
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
