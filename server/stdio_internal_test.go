package server

import (
	"encoding/json"
	"testing"
)

func FuzzRecoverID(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"`)
	f.Add(`{"params":[1,2,{"b":[]}],"id":"s"`)
	f.Add(`{"id":{"x":1}}`)
	f.Fuzz(func(t *testing.T, head string) {
		id := recoverID([]byte(head))
		if id == nil {
			return
		}
		var v any
		if err := json.Unmarshal(id, &v); err != nil {
			t.Fatalf("recovered id %q is not JSON", id)
		}
		switch v.(type) {
		case string, float64, nil:
		default:
			t.Fatalf("recovered id %q is not a string, number or null", id)
		}
	})
}
