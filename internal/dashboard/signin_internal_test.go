package dashboard

import "testing"

// TestSafeNextStaysOnTheSite: where a sign-in returns to is a path on
// this server, whatever a crafted link puts there; browsers drop tabs and
// newlines in an address and read a backslash as a slash.
func TestSafeNextStaysOnTheSite(t *testing.T) {
	for next, want := range map[string]string{
		"":                        "/",
		"/":                       "/",
		"/tasks/abc?x=1#f":        "/tasks/abc?x=1#f",
		"/sessions":               "/sessions",
		"https://evil.example/":   "/",
		"evil.example":            "/",
		"//evil.example":          "/",
		"/\\evil.example":         "/",
		"/\t/evil.example/phish":  "/",
		"/\n/evil.example":        "/",
		"/\r\n/evil.example":      "/",
		"/x\\..\\..\\evil":        "/",
		"/\x7f/evil.example":      "/",
		"/\x00/evil.example":      "/",
		"/tasks/%2F%2Fevil":       "/tasks/%2F%2Fevil",
		"/tasks/ünïcode-and-more": "/tasks/ünïcode-and-more",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
