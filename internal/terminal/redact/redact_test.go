package redact

import "testing"

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain text unchanged", "FAKE-REPLY: hello world", "FAKE-REPLY: hello world"},
		{"bearer", "curl -H 'Authorization: Bearer abc.DEF-123_x' host", "curl -H 'Authorization: Bearer [REDACTED]' host"},
		{"--token value", "gh auth --token s3cr3tvalue now", "gh auth --token [REDACTED] now"},
		{"--token=value", "tool --token=s3cr3t", "tool --token=[REDACTED]"},
		{"--api-token quoted", `x --api-token "a b c" y`, "x --api-token [REDACTED] y"},
		{"API_KEY=", "export OPENAI_API_KEY=abc123 && run", "export OPENAI_API_KEY=[REDACTED] && run"},
		{"TOKEN=", "GITHUB_TOKEN=xyz make", "GITHUB_TOKEN=[REDACTED] make"},
		{"SECRET quoted", `AWS_SECRET_ACCESS_KEY="wJalr XUtnFEMI"`, "AWS_SECRET_ACCESS_KEY=[REDACTED]"},
		{"PASSWORD", "DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED]"},
		{"PASSWD lower", "mysql_passwd=hunter2", "mysql_passwd=[REDACTED]"},
		{"PRIVATE_KEY json", `{"private_key": "abc"}`, `{"private_key": [REDACTED]}`},
		{"ACCESS_KEY", "MY_ACCESS_KEY: AKxyz", "MY_ACCESS_KEY: [REDACTED]"},
		{"sk- key", "key is sk-proj-abcdefghijklmnop end", "key is [REDACTED] end"},
		{"sk- too short", "sk-short", "sk-short"},
		{"github classic", "token ghp_0123456789abcdefABCDEF0123 x", "token [REDACTED] x"},
		{"github server", "ghs_0123456789abcdefABCD", "[REDACTED]"},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[REDACTED]"},
		{"aws key id", "id AKIAIOSFODNN7EXAMPLE used", "id [REDACTED] used"},
		{"pem", "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nafter", "before\n[REDACTED]\nafter"},
		{"pem cut off", "x -----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl", "x [REDACTED]"},
		{"url userinfo", "git clone https://user:pa55@github.example/x.git", "git clone https://[REDACTED]@github.example/x.git"},
		{"url user only", "postgres://admin@db:5432/x", "postgres://[REDACTED]@db:5432/x"},
		{"url without userinfo", "https://example.com/a@b", "https://example.com/a@b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"Bearer x", "A_TOKEN=1", "sk-aaaaaaaaaaaaaaaa", "https://u:p@h/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := Redact(s)
		if again := Redact(once); again != once {
			t.Errorf("Redact is not idempotent: %q -> %q -> %q", s, once, again)
		}
	})
}
