package config

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/google/go-cmp/cmp"
)

func TestParseTokensFile(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []UserToken
		wantErr   bool
	}{
		{"flat object", `{"bob":"t2","alice":"t1"}`, []UserToken{{"alice", "t1"}, {"bob", "t2"}}, false},
		{"tokens object", `{"tokens":{"alice":"t1"}}`, []UserToken{{"alice", "t1"}}, false},
		{"array", `[{"name":"zed","token":"t9"},{"name":"","token":"x"},{"name":"amy","token":7}]`, []UserToken{{"zed", "t9"}}, false},
		{"not json", `nope`, nil, true},
		{"scalar", `"x"`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTokensFile([]byte(tt.doc))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tokens mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	tests := []struct {
		name         string
		opts         AuthOptions
		pass, bearer string
		want         taskapi.Identity
		ok, required bool
	}{
		{"open", AuthOptions{}, "", "", taskapi.Identity{}, true, false},
		{"open ignores junk", AuthOptions{}, "junk", "junk", taskapi.Identity{}, true, false},
		{"user via bearer", AuthOptions{UserTokens: "Alice:a1-0123456789abcdef, Bob:b:2-0123456789abcdef"}, "", "b:2-0123456789abcdef", taskapi.Identity{User: "Bob"}, true, true},
		{"user via pass", AuthOptions{UserTokens: "Alice:a1-0123456789abcdef"}, "a1-0123456789abcdef", "", taskapi.Identity{User: "Alice"}, true, true},
		{"pass checked before bearer", AuthOptions{UserTokens: "Alice:a1-0123456789abcdef,Bob:b1-0123456789abcdef"}, "a1-0123456789abcdef", "b1-0123456789abcdef", taskapi.Identity{User: "Alice"}, true, true},
		{"wrong pass falls to bearer", AuthOptions{UserTokens: "Alice:a1-0123456789abcdef"}, "zz", "a1-0123456789abcdef", taskapi.Identity{User: "Alice"}, true, true},
		{"legacy", AuthOptions{PublicPass: "shared-0123456789abcdef"}, "shared-0123456789abcdef", "", taskapi.Identity{Legacy: true}, true, true},
		{"missing token", AuthOptions{PublicPass: "shared-0123456789abcdef"}, "", "", taskapi.Identity{}, false, true},
		{"wrong token", AuthOptions{UserTokens: "Alice:a1-0123456789abcdef", PublicPass: "shared-0123456789abcdef"}, "", "nope", taskapi.Identity{}, false, true},
		{"duplicate token keeps first", AuthOptions{UserTokens: "Alice:same-0123456789abcdef,Bob:same-0123456789abcdef"}, "", "same-0123456789abcdef", taskapi.Identity{User: "Alice"}, true, true},
		{"malformed entries fail closed", AuthOptions{UserTokens: "justtext,:x,y:"}, "", "", taskapi.Identity{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, tt.opts)
			got, ok := a.Authenticate(tt.pass, tt.bearer)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("identity mismatch (-want +got):\n%s", diff)
			}
			if r := a.Required(); r != tt.required {
				t.Errorf("Required = %v, want %v", r, tt.required)
			}
		})
	}
}

func TestAuthTokensFileReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	a := mustNew(t, AuthOptions{TokensFile: path})
	if !a.Required() {
		t.Fatal("a configured token file must require auth even while it is missing")
	}
	if _, ok := a.Authenticate("", ""); ok {
		t.Fatal("a missing token file must refuse every request, not open the server")
	}
	write := func(body string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(`{"carol":"c1-0123456789abcdef"}`, base)
	if id, ok := a.Authenticate("", "c1-0123456789abcdef"); !ok || id.User != "carol" {
		t.Fatalf("after first write: %+v %v", id, ok)
	}
	write(`[{"name":"dave","token":"d1-0123456789abcdef"}]`, base.Add(time.Second))
	if _, ok := a.Authenticate("", "c1-0123456789abcdef"); ok {
		t.Error("old token still accepted after the file changed")
	}
	if id, ok := a.Authenticate("", "d1-0123456789abcdef"); !ok || id.User != "dave" {
		t.Errorf("new token: %+v %v", id, ok)
	}
}

// TestAuthTokensFileFailsClosed is issue 11 item 1: a token file that is
// deleted, truncated to invalid JSON or emptied under a live server keeps
// the last good set in force and logs an error; it never opens the server.
func TestAuthTokensFileFailsClosed(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{"deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		{"invalid json", func(t *testing.T, path string) { writeAt(t, path, `{"alice":`, base.Add(time.Second)) }},
		{"empty object", func(t *testing.T, path string) { writeAt(t, path, `{}`, base.Add(time.Second)) }},
		{"empty array", func(t *testing.T, path string) { writeAt(t, path, `[]`, base.Add(time.Second)) }},
		{"zero bytes", func(t *testing.T, path string) { writeAt(t, path, ``, base.Add(time.Second)) }},
		{"short token", func(t *testing.T, path string) { writeAt(t, path, `{"a:b":"shorttok"}`, base.Add(time.Second)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "tokens.json")
			writeAt(t, path, `{"alice":"a1-0123456789abcdef"}`, base)
			var logs bytes.Buffer
			a := mustNew(t, AuthOptions{TokensFile: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if _, ok := a.Authenticate("", ""); ok {
				t.Fatal("no token accepted before the change")
			}
			tt.change(t, path)
			if _, ok := a.Authenticate("", ""); ok {
				t.Error("request without a token accepted after the token file changed")
			}
			if _, ok := a.Authenticate("", "wrong"); ok {
				t.Error("wrong token accepted after the token file changed")
			}
			if id, ok := a.Authenticate("", "a1-0123456789abcdef"); !ok || id.User != "alice" {
				t.Errorf("last good token refused: %+v %v", id, ok)
			}
			if !a.Required() {
				t.Error("Required turned false")
			}
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "MCP_USER_TOKENS_FILE") {
				t.Errorf("no error logged for the unusable file; logs:\n%s", logs.String())
			}
			// A good file afterwards is picked up again.
			writeAt(t, path, `{"bob":"b1-0123456789abcdef"}`, base.Add(2*time.Second))
			if id, ok := a.Authenticate("", "b1-0123456789abcdef"); !ok || id.User != "bob" {
				t.Errorf("good file after the bad one: %+v %v", id, ok)
			}
		})
	}
}

// mustNew is NewAuthenticator for options that must be accepted.
func mustNew(t testing.TB, o AuthOptions) *Authenticator {
	t.Helper()
	a, err := NewAuthenticator(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestShortTokenRefused is issue 24 item 9: a token or password shorter
// than MinTokenLength, in any of the three variables, stops the
// Authenticator from being built, with an error that names the entry and
// never shows the token.
func TestShortTokenRefused(t *testing.T) {
	t.Parallel()
	const short = "shorttok"
	file := filepath.Join(t.TempDir(), "tokens.json")
	writeAt(t, file, `{"a:b":"`+short+`","good":"good-token-0123456789"}`, time.Now())
	tests := []struct {
		name string
		opts AuthOptions
		want string
	}{
		{"env token", AuthOptions{UserTokens: "ok:long-enough-token-0001,ana:" + short}, `MCP_USER_TOKENS entry "ana"`},
		{"file token", AuthOptions{TokensFile: file}, `MCP_USER_TOKENS_FILE entry "a:b"`},
		{"shared password", AuthOptions{PublicPass: short}, "PUBLIC_MCP_PASS"},
		{"fifteen characters", AuthOptions{UserTokens: "ana:" + strings.Repeat("x", MinTokenLength-1)}, `entry "ana" is 15 characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := NewAuthenticator(tt.opts)
			if !errors.Is(err, ErrShortToken) || a != nil {
				t.Fatalf("NewAuthenticator = %v, %v; want an ErrShortToken", a, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, short) || strings.Contains(msg, "xxxxxxxx") {
				t.Errorf("error %q: want it to name %s and not show the token", msg, tt.want)
			}
		})
	}
	if _, err := NewAuthenticator(AuthOptions{UserTokens: "ana:" + strings.Repeat("x", MinTokenLength)}); err != nil {
		t.Errorf("a token of exactly %d characters refused: %v", MinTokenLength, err)
	}
}

func writeAt(t *testing.T, path, body string, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func TestAuthFrom(t *testing.T) {
	got := AuthFrom(envOf(map[string]string{"MCP_USER_TOKENS": "a:b", "MCP_USER_TOKENS_FILE": " /f ", "PUBLIC_MCP_PASS": " p "}))
	want := AuthOptions{UserTokens: "a:b", TokensFile: "/f", PublicPass: "p"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AuthFrom mismatch (-want +got):\n%s", diff)
	}
}

func FuzzParseRegistry(f *testing.F) {
	seed, err := os.ReadFile("testdata/agents.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"agents":[{"id":"a","url":"u","password":"p"}],"groups":{"g":["a","a"]}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRegistry(data)
		if err != nil {
			return
		}
		if _, ok := r.Lookup(r.Default); !ok {
			t.Fatalf("default %q is not an agent", r.Default)
		}
		for _, g := range r.Groups {
			if len(g.Members) == 0 {
				t.Fatalf("empty group %q kept", g.Name)
			}
		}
	})
}

func FuzzParseTokensFile(f *testing.F) {
	f.Add([]byte(`{"a":"b"}`))
	f.Add([]byte(`{"tokens":{"a":"b"}}`))
	f.Add([]byte(`[{"name":"a","token":"b"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := ParseTokensFile(data)
		if err != nil {
			return
		}
		for _, tk := range toks {
			if tk.Name == "" || tk.Token == "" {
				t.Fatalf("empty token kept: %+v", tk)
			}
		}
	})
}
