package cli

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestURLCredentialsNeverShown is issue 11 item 5 (URL half): credentials
// inside OPENCLAW_URL ("user:pass@" and "?token=") appear in nothing that
// agents, doctor, run, status or logs print, nor in what the store keeps
// (task errors any MCP client can read).
func TestURLCredentialsNeverShown(t *testing.T) {
	const secret = "hunter2"
	home := t.TempDir()
	// Port 1 refuses connections: the run fails, and its error quotes the URL.
	env := map[string]string{
		"CLAWCONNECT_HOME":  home,
		"OPENCLAW_URL":      "ws://gwuser:" + secret + "@127.0.0.1:1/ws?token=" + secret + "&agent=main",
		"OPENCLAW_PASSWORD": "pw",
	}
	var printed []string
	runAll := func(args ...string) string {
		t.Helper()
		out, errOut, err := runCLIEnv(t, env, args...)
		printed = append(printed, strings.Join(args, " ")+": "+out+errOut)
		if err != nil {
			printed = append(printed, strings.Join(args, " ")+" error: "+err.Error())
		}
		return out + errOut
	}
	runAll("agents")
	runAll("agents", "--json")
	if out := runAll("doctor", "--timeout", "2s"); !strings.Contains(out, "127.0.0.1:1") {
		t.Errorf("doctor does not name the gateway at all:\n%s", out)
	}
	out := runAll("run", "--wait", "--timeout", "30s", "--json", "hello")
	if m := regexp.MustCompile(`"jobId":\s*"([^"]+)"`).FindStringSubmatch(out); m != nil {
		runAll("status", m[1])
		runAll("status", "--json", m[1])
		runAll("logs", m[1])
	} else {
		t.Logf("run printed no job id:\n%s", out)
	}
	for _, p := range printed {
		if strings.Contains(p, secret) {
			t.Errorf("a secret was printed:\n%s", p)
		}
	}
	ents, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasPrefix(e.Name(), "clawconnect.db") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(home, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // a write-ahead log checkpointed away meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), secret) {
			t.Errorf("the store file %s holds the secret", e.Name())
		}
	}
}
