package config

import (
	"strings"
	"testing"
)

// TestRedactURL is the helper half of issue 11 item 5: credentials inside
// a URL (user information, secret-looking query and fragment values) never
// survive, and everything else does.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"ws://127.0.0.1:18789", "ws://127.0.0.1:18789"},
		{"wss://user:hunter2@gw.example:443/ws", "wss://REDACTED@gw.example:443/ws"},
		{"wss://tok3n@gw.example", "wss://REDACTED@gw.example"},
		{"ws://gw.example/?token=hunter2&agent=main", "ws://gw.example/?token=REDACTED&agent=main"},
		{"ws://gw.example?Password=a&x=1&api_key=b&sig=c#access_token=d", "ws://gw.example?Password=REDACTED&x=1&api_key=REDACTED&sig=REDACTED#access_token=REDACTED"},
		{"ws://gw.example?tok%65n=hunter2", "ws://gw.example?tok%65n=REDACTED"},
		{"not a url", "not a url"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`connect wss://u:hunter2@gw.example/x: dial failed`, `connect wss://REDACTED@gw.example/x: dial failed`},
		{`Get "http://gw.example/?token=hunter2": EOF.`, `Get "http://gw.example/?token=REDACTED": EOF.`},
		{`two: ws://a:hunter2@h1, ws://h2?pass=hunter2.`, `two: ws://REDACTED@h1, ws://h2?pass=REDACTED.`},
		{`odd ://x and plain text`, `odd ://x and plain text`},
		{`bad ws://u:hunter2@[::1`, `bad ws://REDACTED@[::1`},
	}
	for _, tt := range tests {
		got := RedactText(tt.in)
		if got != tt.want {
			t.Errorf("RedactText(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("RedactText(%q) leaked the secret: %q", tt.in, got)
		}
	}
}

func FuzzRedactText(f *testing.F) {
	f.Add("connect wss://u:hunter2@gw.example/x?token=hunter2")
	f.Add("ws://[::1]:1/?a=b#c=d")
	f.Fuzz(func(t *testing.T, s string) {
		got := RedactText(s)
		if !strings.Contains(s, "://") && got != s {
			t.Fatalf("text without a URL changed: %q -> %q", s, got)
		}
		// A "user:secret@" right after a scheme never survives.
		if i := strings.Index(got, "://hunter2:"); i >= 0 && i > 0 && schemeByte(got[i-1]) {
			t.Fatalf("userinfo survived in %q", got)
		}
	})
}
