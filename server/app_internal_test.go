package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAppSession feeds withAppSession arbitrary request bodies and session
// ids: it never panics, the next handler always reads the body unchanged,
// and only an initialize that declares the extension's MIME type, or a
// session id it issued, marks the request.
func FuzzAppSession(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}}}`, "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":"text/html;profile=mcp-app"}}}}}`, "")
	f.Add(`{"method":"tools/list","params":{"io.modelcontextprotocol/ui":1}}`, "ccapp1-00")
	f.Add(`[{"method":"initialize"}]`, "other-session")
	f.Add("\x00io.modelcontextprotocol/ui{", "")
	f.Fuzz(func(t *testing.T, body, sid string) {
		var got []byte
		var marked bool
		h := withAppSession(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			got, _ = io.ReadAll(r.Body)
			marked = appDeclared(r.Context())
		}))
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if sid != "" {
			r.Header.Set("Mcp-Session-Id", sid)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if !bytes.Equal(got, []byte(body)) {
			t.Fatalf("the next handler read %q, want %q", got, body)
		}
		issued := w.Header().Get("Mcp-Session-Id")
		switch {
		case strings.HasPrefix(sid, appSessionPrefix):
			if !marked || issued != sid {
				t.Fatalf("app session %q: marked %v, answered %q", sid, marked, issued)
			}
		case sid != "":
			if marked || issued != "" {
				t.Fatalf("foreign session %q: marked %v, answered %q", sid, marked, issued)
			}
		case marked != strings.HasPrefix(issued, appSessionPrefix):
			t.Fatalf("marked %v but issued %q", marked, issued)
		case marked && !strings.Contains(body, AppMIMEType):
			t.Fatalf("marked a body that does not name %s: %q", AppMIMEType, body)
		}
	})
}

// BenchmarkAppSession is what withAppSession adds to a 2025-11-25 POST
// without a session id (it reads the body to look for a declaring
// initialize): "direct" is the next handler reading the body alone.
func BenchmarkAppSession(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_task","arguments":{"task":"` + strings.Repeat("x", 2000) + `"}}}`
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	for name, h := range map[string]http.Handler{"direct": next, "withAppSession": withAppSession(next)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}
