package terminal

import (
	"bufio"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/executor"
)

// decodeFile decodes a session file recorded from the real TUI and returns
// the kinds of the payloads, in order.
func decodeFile(t *testing.T, agent, path string) ([]executor.Payload, decoder) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := newDecoder(agent)
	var out []executor.Payload
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		out = append(out, d.line(sc.Bytes())...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, d
}

func kindsOf(ps []executor.Payload) []executor.Kind {
	var out []executor.Kind
	for _, p := range ps {
		out = append(out, p.Kind())
	}
	return out
}

// TestDecodeRecordedSessions decodes the rollout and transcript recorded
// from the real Codex 0.171 and Claude Code 2.1.332 TUIs (a reply, then an
// approved tool call): text, the tool call answered by its result, usage.
func TestDecodeRecordedSessions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		agent, path string
		want        []executor.Kind
		tool        string
	}{
		{"codex", "../../internal/terminal/agents/codex/testdata/rollout-approval.jsonl",
			[]executor.Kind{executor.KindTextDelta, executor.KindToolCall, executor.KindToolResult, executor.KindTextDelta}, "exec_command"},
		// Claude Code says what it will do before the tool call.
		{"claude", "../../internal/terminal/agents/claude/testdata/transcript-approval.jsonl",
			[]executor.Kind{executor.KindTextDelta, executor.KindTextDelta, executor.KindToolCall, executor.KindToolResult, executor.KindTextDelta}, "Bash"},
	}
	for _, tc := range tests {
		t.Run(tc.agent, func(t *testing.T) {
			t.Parallel()
			ps, d := decodeFile(t, tc.agent, tc.path)
			if diff := cmp.Diff(tc.want, kindsOf(ps)); diff != "" {
				t.Fatalf("kinds (-want +got):\n%s", diff)
			}
			at := len(ps) - 3
			call := ps[at].(executor.ToolCall)
			res := ps[at+1].(executor.ToolResult)
			if call.Name != tc.tool || call.ToolCallID == "" || res.ToolCallID != call.ToolCallID || res.Name != call.Name {
				t.Errorf("call %+v, result %+v", call, res)
			}
			if first := ps[0].(executor.TextDelta); first.Text != "FAKE-REPLY: say hello WAIT=1500" {
				t.Errorf("first text %q", first.Text)
			}
			if u := d.usage(); u == nil || u.InputTokens == 0 || u.OutputTokens == 0 {
				t.Errorf("usage = %+v", u)
			}
		})
	}
}

// FuzzDecode: no session-file line makes a decoder panic, and every tool
// result it reports carries the id of a call.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"type":"response_item","payload":{"type":"function_call","name":"x","arguments":"{}","call_id":"c1"}}`))
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}],"usage":{"input_tokens":1}}}`))
	f.Add([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"ok"}]}]}}`))
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":3}}}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, agent := range []string{"codex", "claude"} {
			d := newDecoder(agent)
			for _, p := range d.line(line) {
				if p == nil {
					t.Fatal("nil payload")
				}
			}
			_ = d.usage()
		}
	})
}

func TestReadLinesKeepsThePartialLine(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/s.jsonl"
	if err := os.WriteFile(path, []byte("one\ntw"), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, off, partial := readLines(path, 0, nil)
	if len(lines) != 1 || string(lines[0]) != "one" || off != 6 || string(partial) != "tw" {
		t.Fatalf("first read: %q %d %q", lines, off, partial)
	}
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, off, partial = readLines(path, off, partial)
	if len(lines) != 1 || string(lines[0]) != "two" || off != 8 || len(partial) != 0 {
		t.Fatalf("second read: %q %d %q", lines, off, partial)
	}
}
