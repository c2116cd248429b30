package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/bridge"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/server"
)

// tasksHTTP is serve's /mcp over one bridge, spoken to as a 2026-07-28
// client that may declare the MCP Tasks extension.
type tasksHTTP struct {
	url    string
	client *http.Client
	br     *bridge.Bridge
}

// openTasksHTTP opens a bridge on home (agent alpha on the instant fake
// gateway fg) behind an HTTP server.
func openTasksHTTP(b *testing.B, home string, fg *fakegateway.Server) *tasksHTTP {
	b.Helper()
	agents := `{"default":"alpha","agents":[{"id":"alpha","url":"` + fg.URL() + `","password":"pw"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		b.Fatal(err)
	}
	env := map[string]string{"CLAWCONNECT_HOME": home}
	br, err := bridge.Open(context.Background(), bridge.Options{Settings: settingsOf(b, env)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(br.Close)
	srv, err := server.New(server.Options{Tasks: br, Registry: br.Registry(), TaskRetention: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	return &tasksHTTP{url: ts.URL + "/mcp", client: ts.Client(), br: br}
}

// post sends one request declaring the extension (when tasks is set).
func (h *tasksHTTP) post(ctx context.Context, tasks bool, method, name string, params map[string]any) (*http.Response, error) {
	ext := map[string]any{}
	if tasks {
		ext[server.TasksExtension] = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": ext},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	return h.client.Do(req)
}

// call posts one request and returns its result, failing on an error.
func (h *tasksHTTP) call(ctx context.Context, tasks bool, method, name string, params map[string]any) (map[string]any, error) {
	resp, err := h.post(ctx, tasks, method, name, params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndex(data, []byte("data: ")); i >= 0 { // an event stream: the last event
		data = data[i+len("data: "):]
	}
	var msg struct {
		Result map[string]any  `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &msg); err != nil || msg.Error != nil {
		return nil, fmt.Errorf("%s: %v %s", method, err, data)
	}
	return msg.Result, nil
}

// BenchmarkTasksExtension measures the MCP Tasks extension over serve's
// HTTP handler, the real bridge (SQLite) and an instant fake gateway.
//
// create: a run_task answered with a task handle (the CreateTaskResult,
// which reads the stored task back) against the same run_task without the
// extension, alternating in each op, so x-vs-plain comes from one run.
//
// get: tasks/get of a finished task on two bridges at once, one whose
// store holds 10^3 finished tasks and one 10^6, alternating (the setup of
// internal/task's BenchmarkGetTask); x-vs-1e3 must stay near 1.
//
// listen: from the gateway's end of a held run to the completed
// notifications/tasks on an open listen, against the same end seen by a
// check_task already waiting in-process and by one waiting over the same
// HTTP path without the extension (the floors); ns/op-over-check and
// ns/op-over-http are what the listen adds.
func BenchmarkTasksExtension(b *testing.B) {
	ctx := context.Background()
	fg := fakegateway.New(b, fakegateway.Options{Password: "pw"})
	b.Run("create", func(b *testing.B) {
		h := openTasksHTTP(b, b.TempDir(), fg)
		args := map[string]any{"task": "ECHO=ok bench"}
		var spent [2]time.Duration
		i := 0
		for b.Loop() {
			i++
			for j := range 2 {
				k := (i + j) % 2
				start := time.Now()
				res, err := h.call(ctx, k == 1, "tools/call", "run_task", map[string]any{"name": "run_task", "arguments": args})
				spent[k] += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if want := [2]string{"complete", "task"}[k]; res["resultType"] != want {
					b.Fatalf("resultType = %v, want %s", res["resultType"], want)
				}
			}
		}
		b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op-plain")
		b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "ns/op-task")
		b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-vs-plain")
	})
	b.Run("listen", func(b *testing.B) {
		hfg := fakegateway.New(b, fakegateway.Options{Password: "pw", Script: func(fakegateway.Submit) fakegateway.Turn {
			return fakegateway.Turn{Reply: "done", Hold: true}
		}})
		h := openTasksHTTP(b, b.TempDir(), hfg)
		var notify, check, checkHTTP time.Duration
		for b.Loop() {
			res, err := h.call(ctx, true, "tools/call", "run_task", map[string]any{"name": "run_task", "arguments": map[string]any{"task": "hold"}})
			if err != nil {
				b.Fatal(err)
			}
			id := res["taskId"].(string)
			if err := hfg.AwaitRun(ctx, id); err != nil {
				b.Fatal(err)
			}
			resp, err := h.post(ctx, true, "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
			if err != nil {
				b.Fatal(err)
			}
			events := bufio.NewScanner(resp.Body)
			nextEvent := func() string {
				for events.Scan() {
					if line, ok := bytes.CutPrefix(events.Bytes(), []byte("data: ")); ok {
						return string(line)
					}
				}
				b.Fatalf("the listen stream ended: %v", events.Err())
				return ""
			}
			nextEvent() // the acknowledgement
			nextEvent() // the task, working
			// The floors: a check_task already waiting on the task in this
			// process learns of the end, and one waiting over the same HTTP
			// path without the extension (a plain tools/call) returns it;
			// the listen must follow closely.
			waiting, overHTTP := make(chan time.Time, 1), make(chan time.Time, 1)
			go func() {
				_, _ = h.br.Check(ctx, server.CheckRequest{JobID: id, Mode: server.ModeWait, Wait: time.Minute}, nil)
				waiting <- time.Now()
			}()
			go func() {
				_, _ = h.call(ctx, false, "tools/call", "check_task", map[string]any{"name": "check_task", "arguments": map[string]any{"jobId": id, "mode": "wait", "waitMs": 60000}})
				overHTTP <- time.Now()
			}()
			start := time.Now()
			hfg.Release(id)
			for !bytes.Contains([]byte(nextEvent()), []byte(`"status":"completed"`)) {
			}
			notify += time.Since(start)
			check += (<-waiting).Sub(start)
			checkHTTP += (<-overHTTP).Sub(start)
			_ = resp.Body.Close()
		}
		b.ReportMetric(float64(notify.Nanoseconds())/float64(b.N), "ns/op-notify")
		b.ReportMetric(float64(check.Nanoseconds())/float64(b.N), "ns/op-check")
		b.ReportMetric(float64(checkHTTP.Nanoseconds())/float64(b.N), "ns/op-check-http")
		b.ReportMetric(float64((notify-check).Nanoseconds())/float64(b.N), "ns/op-over-check")
		b.ReportMetric(float64((notify-checkHTTP).Nanoseconds())/float64(b.N), "ns/op-over-http")
	})
	b.Run("get", func(b *testing.B) {
		sizes := [2]int{1_000, 1_000_000}
		var hs [2]*tasksHTTP
		for k, n := range sizes {
			home := b.TempDir()
			st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(home, sqlite.FileName)})
			if err != nil {
				b.Fatal(err)
			}
			if err := st.SeedTasks(ctx, "alpha", "seed-", n, false); err != nil {
				b.Fatal(err)
			}
			if err := st.Close(); err != nil {
				b.Fatal(err)
			}
			// Seeded tasks ended in 1970; end them now, or the bridge's
			// retention sweep at start would remove them.
			db, err := sql.Open("sqlite", filepath.Join(home, sqlite.FileName))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `UPDATE tasks SET ended_at = ?`, time.Now().UnixMilli()); err != nil {
				b.Fatal(err)
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			hs[k] = openTasksHTTP(b, home, fg)
		}
		// recent: the newest 1000 tasks (what clients poll); spread: 1000
		// tasks evenly through the whole store.
		pick := map[string]func(n, i int) string{
			"recent": func(n, i int) string { return fmt.Sprintf("seed-%d", n-(i*7919)%1000) },
			"spread": func(n, i int) string { return fmt.Sprintf("seed-%d", 1+(i*7919)%1000*(n/1000)) },
		}
		for _, set := range []string{"recent", "spread"} {
			b.Run(set, func(b *testing.B) {
				var spent [2]time.Duration
				i := 0
				for b.Loop() {
					i++
					for j := range 2 {
						k := (i + j) % 2
						id := pick[set](sizes[k], i)
						start := time.Now()
						res, err := hs[k].call(ctx, true, "tasks/get", id, map[string]any{"taskId": id})
						spent[k] += time.Since(start)
						if err != nil {
							b.Fatal(err)
						}
						if res["status"] != "completed" {
							b.Fatalf("tasks/get %s = %v", id, res)
						}
					}
				}
				b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op-1e3")
				b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "ns/op-1e6")
				b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-vs-1e3")
			})
		}
	})
}
