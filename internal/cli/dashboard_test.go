package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

// TestServeDashboardHearsOtherProcesses: an open Tasks page of serve's
// dashboard shows a task that another process (a stdio server, as an MCP
// client starts one) creates, through the store's change feed and well
// before the page's 30 s safety re-read; and that task's page shows its
// attachment lineage, which serve reads from the store.
func TestServeDashboardHearsOtherProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	e := newBridgeEnv(t, func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Reply: "done here"} })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	serveCmd := e.clawconnectCmd("serve", "--addr", "127.0.0.1:0")
	serveLogs := newLineWatch()
	serveCmd.Stderr = serveLogs
	if err := serveCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serveCmd.Process.Signal(syscall.SIGTERM)
		_ = serveCmd.Wait()
		if t.Failed() {
			t.Logf("serve stderr:\n%s", serveLogs)
		}
	})
	awaitAny(t, "dashboard at http://", 30*time.Second, serveLogs)
	line := serveLogs.String()
	base := strings.TrimSuffix(strings.Fields(line[strings.Index(line, "dashboard at http://")+len("dashboard at "):])[0], "/")

	// An open loopback serve gives the browser an anonymous session.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	if resp, err := hc.Get(base + "/"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events?page=tasks", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 64)
	go func() { // ends with ctx (which ends the request) or the stream
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	until := func(want string, limit time.Duration) {
		t.Helper()
		deadline := time.After(limit)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %q", want)
				}
				if strings.Contains(l, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q on the stream within %s", want, limit)
			}
		}
	}
	until("event: live", 20*time.Second)

	cmd := e.clawconnectCmd("mcp")
	cmd.Stderr = io.Discard
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "other", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	run := mcpCall(ctx, t, cs, "run_task", map[string]any{"task": "from another process",
		"context": `<agent-session>{"runtime":"local-tmux","sessionId":"pane-one","state":"running"}</agent-session>`})
	jobID, _ := mcpStructured(t, run)["jobId"].(string)
	if run.IsError || jobID == "" {
		t.Fatalf("run_task: %s", mcpText(run))
	}
	// Well inside the 30 s safety re-read: only the feed can bring it.
	until(`data-task=\"`+jobID+`\"`, 10*time.Second)

	page, err := hc.Get(base + "/tasks/" + jobID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), `class="lineage"`) || !strings.Contains(string(body), "pane-one") {
		t.Errorf("task page: %d, lineage shown: %v", page.StatusCode, strings.Contains(string(body), `class="lineage"`))
	}
}
