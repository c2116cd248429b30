package gateway

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeFrame(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		ok   bool
		typ  string
	}{
		{"response", `{"type":"res","id":"1","ok":true,"payload":{}}`, true, "res"},
		{"error response", `{"type":"res","id":"1","ok":false,"error":{"code":"X","message":"m"}}`, true, "res"},
		{"event", `{"type":"event","event":"tick","payload":{"ts":1},"seq":3}`, true, "event"},
		{"leading space", "  \n{\"type\":\"event\",\"event\":\"tick\"}", true, "event"},
		{"empty", ``, false, ""},
		{"not json", `hello`, false, ""},
		{"array", `[1,2]`, false, ""},
		{"truncated", `{"type":"res","id":"1",`, false, ""},
		{"wrong field type", `{"type":"res","id":1}`, false, ""},
		{"ok wrong type", `{"type":"res","ok":"yes"}`, false, ""},
		{"unknown type", `{"type":"req","id":"1","method":"x"}`, false, ""},
		{"response without id", `{"type":"res","ok":true}`, false, ""},
		{"event without name", `{"type":"event"}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := decodeFrame([]byte(tt.in))
			if tt.ok != (err == nil) {
				t.Fatalf("decodeFrame(%q) err = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, errBadFrame) {
				t.Errorf("error %v does not wrap errBadFrame", err)
			}
			if f.Type != tt.typ {
				t.Errorf("type = %q, want %q", f.Type, tt.typ)
			}
		})
	}
	// ok:false without an error object still yields an error to the caller.
	f, err := decodeFrame([]byte(`{"type":"res","id":"1","ok":false}`))
	if err != nil || f.Error == nil {
		t.Errorf("ok:false without error: %+v, %v", f, err)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"res","id":"1","ok":true,"payload":{"runId":"r"}}`,
		`{"type":"event","event":"chat","payload":{"runId":"r","state":"final","message":{"content":[{"type":"text","text":"x"}]}}}`,
		`{"type":"event","event":"agent","payload":{"runId":"r","stream":"tool","data":{"phase":"start","name":"message","args":{"message":"m"}}}}`,
		`not json`, `{"type":1}`, `{}`,
		`{"type":"event","event":"agent","payload":{"runId":"r","data":{"aborted":"x"}}}`,
		`{"type":"event","event":"chat","payload":{"runId":"r","message":{"content":7}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The client's whole frame handler must not panic either.
		c := &Client{log: slog.New(slog.DiscardHandler), pending: map[string]*pendingCall{},
			runsByID: map[string][]*Run{}, runsBySess: map[string][]*Run{}, subs: map[int]*subscription{}}
		r := &Run{c: c, id: "r", notify: make(chan struct{}, 1)}
		c.runsByID["r"] = []*Run{r}
		c.handleFrame(nil, data)
		for _, it := range r.queue {
			if it.kind == itemEvent && it.event == "chat" {
				_ = it.p.Message.text()
			}
			if it.kind == itemEvent && it.event == "agent" {
				_ = messageToolText(it.p.Data.Args)
				_ = toolSummary(it.p.Data.Args)
				_ = errorText(it.p.Data.Error)
			}
		}
		fr, err := decodeFrame(data)
		if err != nil {
			return
		}
		if fr.Type != frameRes && fr.Type != frameEvent {
			t.Fatalf("accepted frame of type %q", fr.Type)
		}
		// The payload helpers must not panic on anything that decodes.
		_ = contentText(fr.Payload)
		_, _ = parseWait(fr.Payload)
		_, _ = parseHistory(fr.Payload)
		_ = messageToolText(fr.Payload)
		_ = toolSummary(fr.Payload)
		_ = errorText(fr.Payload)
	})
}

func TestContentText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"x"},{"type":"text","text":"b"}]}`, "a\nb"},
		{`{"role":"user","content":"plain"}`, "plain"},
		{`{"text":"top"}`, "top"},
		{`{"content":42}`, ""},
		{`null`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		if got := contentText([]byte(tt.in)); got != tt.want {
			t.Errorf("contentText(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:18789", "ws://127.0.0.1:18789"},
		{"https://gw.example.test/", "wss://gw.example.test/"},
		{"ws://h:1", "ws://h:1"},
		{"WSS://h:1/x", "wss://h:1/x"},
		{"127.0.0.1:18789", "ws://127.0.0.1:18789"},
		{"ftp://h", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := NormalizeURL(tt.in)
		if (err != nil) != (tt.want == "") || got != tt.want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{"", nil, false},
		{`{"X-Api":"a","N":3,"b":null}`, map[string]string{"x-api": "a"}, false},
		{`{"CF-Access-Client-Id":"i","CF-Access-Client-Secret":"s"}`,
			map[string]string{"cf-access-client-id": "i", "cf-access-client-secret": "s", "x-forwarded-for": SyntheticClientAddress}, false},
		{`{"cf-access-token":"t","X-Forwarded-For":"10.0.0.1"}`,
			map[string]string{"cf-access-token": "t", "x-forwarded-for": "10.0.0.1"}, false},
		{`{not json`, nil, true},
	}
	for _, tt := range tests {
		got, err := ParseHeaders(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseHeaders(%q) err = %v", tt.in, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseHeaders(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestDevicePayloadV3(t *testing.T) {
	t.Parallel()
	seed := make([]byte, ed25519.SeedSize)
	d := NewDevice(ed25519.NewKeyFromSeed(seed))
	got := devicePayloadV3(d.ID, "gateway-client", "backend", "operator",
		[]string{ScopeRead, ScopeWrite, ScopeAdmin}, 1796031550428, "tok", "n-1", " Linux ", "")
	want := "v3|" + d.ID + "|gateway-client|backend|operator|operator.read,operator.write,operator.admin|1796031550428|tok|n-1|linux|"
	if got != want {
		t.Errorf("payload =\n%s\nwant\n%s", got, want)
	}
	p := d.sign(got, 1796031550428, "n-1")
	if p.ID != d.ID || p.Nonce != "n-1" || strings.ContainsAny(p.Signature+p.PublicKey, "=+/") {
		t.Errorf("device params = %+v", p)
	}
}

func TestPreRunBufferEvictsAgentFramesFirst(t *testing.T) {
	t.Parallel()
	c := &Client{}
	r := &Run{c: c, notify: make(chan struct{}, 1)}
	r.post(runItem{kind: itemEvent, event: "chat", p: &runPayload{RunID: "x", State: "delta"}})
	for i := 0; i < MaxPreRunFrames; i++ {
		r.post(runItem{kind: itemEvent, event: "agent", p: &runPayload{RunID: "x", Seq: int64(i)}})
	}
	if len(r.queue) != MaxPreRunFrames {
		t.Fatalf("queue len %d, want %d", len(r.queue), MaxPreRunFrames)
	}
	if r.queue[0].event != "chat" {
		t.Errorf("the chat frame was evicted before agent frames")
	}
	if r.queue[1].p.Seq != 1 {
		t.Errorf("oldest remaining agent seq = %d, want 1", r.queue[1].p.Seq)
	}
	if c.dropped.Load() != 1 {
		t.Errorf("dropped = %d, want 1", c.dropped.Load())
	}
}

// FuzzAppendReq holds a request frame to json.Marshal of its reqFrame:
// the same JSON value, for any id and method and valid params.
func FuzzAppendReq(f *testing.F) {
	f.Add("1", "chat.send", `{"message":"<b>&é \u2028","sessionKey":"agent:main:x"}`)
	f.Add("z9", "a\"b\\c\x01", ` [ 1 , {"a" : null} ] `)
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, id, method, params string) {
		if params != "" && !json.Valid([]byte(params)) {
			return
		}
		want, err := json.Marshal(reqFrame{Type: frameReq, ID: id, Method: method, Params: json.RawMessage(params)})
		if err != nil {
			t.Fatal(err)
		}
		got := appendReq(nil, id, method, json.RawMessage(params))
		var w, g any
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("appendReq gave invalid JSON %q: %v", got, err)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("appendReq(%q, %q, %q) = %s, json.Marshal gives %s", id, method, params, got, want)
		}
	})
}

// FuzzPayloadStatus holds payloadStatus to encoding/json.
func FuzzPayloadStatus(f *testing.F) {
	for _, s := range []string{`{"status":"accepted","runId":"r"}`, `{"status":"ok","result":{"status":"x"}}`,
		`{"Status":"accepted"}`, `{"status":"a","status":"b"}`, `{"status":null}`, `{"status":"\u0061ccepted"}`,
		`{"status":7}`, `[]`, `null`, `{"status":"accepted"`, `{"st\u0061tus":"accepted"}`, `{"ſtatus":"accepted"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var s struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(payload, &s)
		if got := payloadStatus(payload); got != s.Status {
			t.Errorf("payloadStatus(%q) = %q, encoding/json gives %q", payload, got, s.Status)
		}
	})
}
