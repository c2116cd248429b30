package gateway

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fullDecode is the reference for scanRunEvent: the encoding/json decode
// the fast path replaces.
func fullDecode(data []byte) (*runPayload, bool) {
	var f struct {
		Payload runPayload `json:"payload"`
	}
	if json.Unmarshal(data, &f) != nil || f.Payload.RunID == "" {
		return nil, false
	}
	return &f.Payload, true
}

var payloadCmp = cmp.AllowUnexported(content{})

// scanSeeds are frames in the shapes the gateway sends (agent and chat events) plus
// edge cases the fast path must decline or decode exactly.
var scanSeeds = []string{
	`{"type":"event","event":"agent","payload":{"runId":"r","sessionKey":"agent:main:s","seq":6,"stream":"assistant","ts":1796031566666,"data":{"text":"FAKE-REPLY:","delta":"FAKE-REPLY:","itemId":"x:1"}},"seq":7}`,
	`{"type":"event","event":"chat","payload":{"runId":"r","sessionKey":"agent:main:s","seq":6,"state":"delta","deltaText":"x","message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"t"},{"type":"text","text":"b"}],"timestamp":1}},"seq":8}`,
	`{"type":"event","event":"chat","payload":{"runId":"r","seq":11,"state":"final","stopReason":"stop","message":{"role":"assistant","content":"plain","text":"t"}}}`,
	`{"type":"event","event":"chat","payload":{"runId":"r","seq":1,"state":"status","phase":"preparing_workspace"}}`,
	`{"type":"event","event":"chat","payload":{"runId":"r","state":"error","errorMessage":"LLM request failed","errorDetail":{"provider":"fake","httpStatus":400}}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","seq":3,"stream":"tool","data":{"phase":"start","name":"exec","toolCallId":"c1","args":{"command":"ls -la"}}}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","seq":4,"stream":"tool","data":{"phase":"result","name":"exec","isError":true}}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","seq":11,"stream":"lifecycle","data":{"phase":"end","stopReason":"stop","aborted":false,"error":null,"terminalReply":{"disposition":"visible","text":"done"},"executionSettled":true}}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","stream":"lifecycle","data":{"phase":"error","error":{"message":"boom"}}}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","stream":"assistant","data":{"text":"line\none \"q\" \u00e9 \ud83d\ude00"}}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","stream":"assistant","data":{"text":"h\u00e9llo wörld"}}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","data":{"text":"\ud800"}}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","data":{"text":"a"},"data":{"name":"b"}}}`,
	`{"type":"event","event":"agent","payload":{"RunID":"r"}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","seq":1.5}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","seq":"1"}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r","seq":-0,"data":null,"message":null}}`,
	`{"type":"event","event":"agent","payload":{"runId":"r"}} x`,
	`{"type":"event","event":"agent","payload":{"runId":"r"},"x":[1,2,{"a":[]}],"y":01}`,
	`{"type":"event","event":"chat","payload":{"runId":"r","message":{"content":[1,{"type":"text","text":"x"}]}}}`,
	`{"type":"event","event":"chat","payload":{"runId":"r","message":{"content":[null,{"type":"text","text":"x"},{"type":5}]}}}`,
	`{"type":"event","event":"chat","payload":{"runId":"r","message":{"content":{"type":"text"}}}}`,
	`{"type":"event","event":"chat","payload":{"runId":"","state":"final"}}`,
	`{"type":"event","event":"chat","payload":null}`,
	`{"type":"event","event":"chat","payload":{"runId":"r","errorMessage":"bad \x01"}}`,
	"{\"type\":\"event\",\"event\":\"chat\",\"payload\":{\"runId\":\"r\xff\"}}",
	`{"type":"event","event":"chat","payload":{"runId":"r","ſtate":"final"}}`,
}

func TestScanRunEventMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range scanSeeds {
		t.Run(s, func(t *testing.T) {
			checkScanAgrees(t, []byte(s))
		})
	}
}

// TestScanRunEventTakesCommonFrames checks the fast path does not decline
// the frames that make up the traffic (else it would be no faster).
func TestScanRunEventTakesCommonFrames(t *testing.T) {
	t.Parallel()
	for _, s := range scanSeeds[:11] {
		t.Run(s, func(t *testing.T) {
			got, ok := scanRunEvent([]byte(s))
			if !ok {
				t.Fatalf("fast path declined a common frame")
			}
			want, _ := fullDecode([]byte(s))
			if diff := cmp.Diff(want, got, payloadCmp); diff != "" {
				t.Errorf("payload (-encoding/json +fast):\n%s", diff)
			}
		})
	}
}

func checkScanAgrees(t *testing.T, data []byte) {
	t.Helper()
	got, ok := scanRunEvent(data)
	if !ok {
		return // declined: the caller falls back to encoding/json
	}
	want, wantOK := fullDecode(data)
	if !wantOK {
		t.Fatalf("fast path accepted %q, encoding/json rejects it", data)
	}
	if diff := cmp.Diff(want, got, payloadCmp); diff != "" {
		t.Fatalf("payload of %q (-encoding/json +fast):\n%s", data, diff)
	}
}

// FuzzScanRunEvent checks that whenever the fast path accepts a frame, it
// decodes exactly what encoding/json decodes.
func FuzzScanRunEvent(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScanAgrees)
}
