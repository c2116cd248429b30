package claudecode

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/clawconnect/clawconnect/executor"
)

// FuzzDecode feeds arbitrary lines to the stream-json decoder: it must never
// panic, every payload must marshal as an event, and at most one terminal
// may come from one line.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		initLine(),
		assistantText("FAKE-REPLY 3: you said: say hello"),
		resultLine("success", "ok", false),
		`{"type":"result","subtype":"error_max_turns"}`,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":[{"message":"x"},"y",3]}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":null},{"type":"thinking","thinking":"t"}]}}`,
		`{"type":"user","message":{"role":"user","content":"plain"}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":{"weird":true}}]}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}}`,
		`{"type":"system","subtype":"permission_denied"}`,
		`{"type":`, `[]`, `null`, `"str"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := newDecoder()
		terminals := 0
		d.Decode(line, func(p executor.Payload) {
			if p == nil {
				t.Fatal("nil payload")
			}
			if p.Kind() == executor.KindDone {
				terminals++
			}
			if _, err := json.Marshal(executor.Event{RunID: "r", Seq: 1, Payload: p}); err != nil {
				t.Fatalf("payload %#v does not marshal: %v", p, err)
			}
		})
		if terminals > 1 {
			t.Fatalf("one line gave %d terminals", terminals)
		}
	})
}

var benchLines = [][]byte{
	[]byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"FAKE-REPLY "}},"session_id":"a3ecc4a9-0000-4000-8000-000000000001","parent_tool_use_id":null,"uuid":"c81846bd-0000-4000-8000-000000000002"}`),
	[]byte(`{"type":"assistant","message":{"id":"msg_fake_5","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"tool_use","id":"toolu_fake_5","name":"Bash","input":{"command":"echo hi-from-tool","description":"fake scripted command"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":6}},"parent_tool_use_id":null,"session_id":"788ed5af-0000-4000-8000-000000000003","uuid":"504f579e-0000-4000-8000-000000000004"}`),
	[]byte(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_fake_5","type":"tool_result","content":"hi-from-tool","is_error":false}]},"parent_tool_use_id":null,"session_id":"788ed5af-0000-4000-8000-000000000003","uuid":"504f579e-0000-4000-8000-000000000005","tool_use_result":{"stdout":"hi-from-tool","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":false}}`),
	[]byte(`{"type":"assistant","message":{"id":"msg_fake_3","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"FAKE-REPLY 3: you said: say hello"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":6}},"parent_tool_use_id":null,"session_id":"a3ecc4a9-0000-4000-8000-000000000001","uuid":"c81846bd-0000-4000-8000-000000000006"}`),
}

// BenchmarkLineToEvent is the native line → normalized event pipeline of
// one run on one goroutine: decode a stream-json line, stamp the envelope
// and queue the event, with the consumer popping. Reports events/s.
func BenchmarkLineToEvent(b *testing.B) {
	d := newDecoder()
	s := executor.NewStream(executor.StreamOptions{})
	emit := func(p executor.Payload) { s.Emit("run", "session", p) }
	events := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.Decode(benchLines[i%len(benchLines)], emit)
		for {
			if _, ok := tryNext(s); !ok {
				break
			}
			events++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/float64(events), "lines/event")
}

// tryNext pops one queued event without waiting.
func tryNext(s *executor.Stream) (executor.Event, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ev, err := s.Next(ctx)
	return ev, err == nil
}
