package dashboard_test

import (
	"net/http"
	"regexp"
	"testing"
)

// TestHealthShowsAGatewayNotDialledYet: gateways are dialled on first use,
// so one no task has used yet is "not connected yet", not "unavailable",
// on the Health page; one a task used is "connected".
func TestHealthShowsAGatewayNotDialledYet(t *testing.T) {
	r := newRig(t, "")
	r.waitDone(t, r.run(t, "alpha", "hello", ""))
	code, _, body := r.browser(t).get("/system")
	if code != http.StatusOK {
		t.Fatalf("GET /system: %d", code)
	}
	for agent, want := range map[string]string{"alpha": "connected", "beta": "not connected yet"} {
		re := regexp.MustCompile(`<strong>` + agent + `</strong> <span class="muted mono">[^<]*</span> — ([^<]*)</li>`)
		m := re.FindStringSubmatch(body)
		if m == nil || m[1] != want {
			t.Errorf("gateway %s shows %q, want %q", agent, m, want)
		}
	}
}
