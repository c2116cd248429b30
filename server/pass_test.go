package server_test

import (
	"net/http/httptest"
	"testing"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
)

// TestNoPassParam: with ?pass= turned off (CLAWCONNECT_PASS_PARAM=off) a
// credential in the URL is ignored, so a request carrying only that is
// refused, while the same token in the Authorization header is served.
func TestNoPassParam(t *testing.T) {
	t.Parallel()
	const tok = "tok-alice-0123456789"
	for _, off := range []bool{false, true} {
		srv, err := server.New(server.Options{Tasks: servertest.New(), Registry: testRegistry(t),
			Auth: mustAuth(t, config.AuthOptions{UserTokens: "alice:" + tok}), NoPassParam: off})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv.Handler())
		list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		inURL, _, _ := rpc(t, ts.URL+"/mcp?pass="+tok, list, nil)
		inHeader, _, _ := rpc(t, ts.URL+"/mcp", list, map[string]string{"Authorization": "Bearer " + tok})
		ts.Close()
		wantURL := 200
		if off {
			wantURL = 403
		}
		if inURL != wantURL || inHeader != 200 {
			t.Errorf("NoPassParam=%t: ?pass= answered %d (want %d), the header %d (want 200)", off, inURL, wantURL, inHeader)
		}
	}
}
