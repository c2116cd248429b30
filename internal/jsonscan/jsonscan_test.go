package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestObject(t *testing.T) {
	t.Parallel()
	type kv struct{ K, V string }
	tests := []struct {
		name    string
		in      string
		want    []kv
		wantErr bool
	}{
		{"members", `{"a":1,"b":"x\"y","c":{"d":[1,2,{"e":null}]},"f":true,"g":-1.5e3}`,
			[]kv{{"a", "1"}, {"b", `"x\"y"`}, {"c", `{"d":[1,2,{"e":null}]}`}, {"f", "true"}, {"g", "-1.5e3"}}, false},
		{"spaces", " { \"a\" : [ ] , \"b\" : { } } \n", []kv{{"a", "[ ]"}, {"b", "{ }"}}, false},
		{"empty", `{}`, nil, false},
		{"truncated", `{"a":{"b":1}`, []kv{{"a", `{"b":1}`}}, true},
		{"not an object", `[1]`, nil, true},
		{"bad literal", `{"a":tru}`, nil, true},
		{"bad number", `{"a":01}`, []kv{{"a", "0"}}, true},
		{"bad escape", `{"a":"\x"}`, nil, true},
		{"trailing garbage", `{"a":1} x`, []kv{{"a", "1"}}, true},
		{"control char in string", "{\"a\":\"\x01\"}", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []kv
			err := Object([]byte(tt.in), func(k, v []byte) bool { got = append(got, kv{string(k), string(v)}); return true })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("members (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScalars(t *testing.T) {
	t.Parallel()
	if s, ok := String([]byte(`"h\u00e9llo \"q\""`)); !ok || s != `héllo "q"` {
		t.Errorf("String = %q, %v", s, ok)
	}
	if _, ok := String([]byte(`null`)); ok {
		t.Error("String(null) ok")
	}
	if f := Float([]byte(`0.25`)); f == nil || *f != 0.25 {
		t.Errorf("Float = %v", f)
	}
	if Float([]byte(`null`)) != nil {
		t.Error("Float(null) != nil")
	}
	if n, ok := Int([]byte(`42`)); !ok || n != 42 {
		t.Errorf("Int = %d, %v", n, ok)
	}
	if !Bool([]byte(`true`)) || Bool([]byte(`1`)) {
		t.Error("Bool wrong")
	}
}

// FuzzObject checks the scanner against encoding/json: it accepts exactly
// the well-formed objects, and reports the same members.
func FuzzObject(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,{"b":"\u0041"}],"c":null}`, `{"a":-0.5e+2}`, `{`, `{"a":1,}`, `[]`, `{"a":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) > 400 {
			t.Skip("deeper than the scanner's limit")
		}
		members := map[string]json.RawMessage{}
		err := Object(b, func(k, v []byte) bool {
			if s, ok := String(append(append([]byte{'"'}, k...), '"')); ok {
				members[s] = append(json.RawMessage(nil), v...)
			}
			return true
		})
		var want map[string]json.RawMessage
		jerr := json.Unmarshal(b, &want)
		if (err == nil) != (jerr == nil) {
			t.Fatalf("scanner err %v, encoding/json err %v, input %q", err, jerr, b)
		}
		if err != nil {
			return
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(members[k]), bytes.TrimSpace(v)) {
				t.Fatalf("member %q: scanner %q, encoding/json %q", k, members[k], v)
			}
		}
	})
}

// BenchmarkObjectStrings walks a run event of the size the gateway sends,
// most of it string bytes.
func BenchmarkObjectStrings(b *testing.B) {
	frame := []byte(`{"type":"event","event":"agent","payload":{"runId":"run-5d1c2a","sessionKey":"agent:main:clawconnect:5d1c2a",` +
		`"stream":"assistant","seq":3,"data":{"text":"` + strings.Repeat("The build passed and the change is ready for review. ", 20) +
		`","delta":"ready for review. \"quoted\" \u00e9"}},"seq":1234}`)
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if err := Object(frame, func(k, v []byte) bool { return true }); err != nil {
			b.Fatal(err)
		}
	}
}
