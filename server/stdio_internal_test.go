package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// FuzzToolResultAsMarshaled holds appendToolResult to the bytes of the
// result's own marshaling, or to writing nothing.
func FuzzToolResultAsMarshaled(f *testing.F) {
	f.Add("plain", "", false, false, false)
	f.Add("<b>&amp; \u2028 é \xff", "second", true, true, false)
	f.Add(`{"a":"</script>"}`, "", false, true, true)
	f.Fuzz(func(t *testing.T, text, second string, isError, withOutput, withMeta bool) {
		out := map[string]any{"text": text, "n": len(text)}
		data, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		r := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
		if second != "" {
			r.Content = append(r.Content, &mcp.TextContent{Text: second})
		}
		if withMeta {
			r.Meta = mcp.Meta{"k": "v"}
		}
		want := *r
		if withOutput {
			r.StructuredContent, want.StructuredContent = structuredJSON(data), out
		}
		wantBytes, err := want.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		done, err := appendToolResult(&buf, r)
		switch {
		case err != nil:
			t.Fatal(err)
		case withMeta && done:
			t.Fatalf("a result with _meta was written by hand: %s", buf.Bytes())
		case !done && buf.Len() > 0:
			t.Fatalf("declined but wrote %q", buf.Bytes())
		case done && !bytes.Equal(buf.Bytes(), wantBytes):
			t.Fatalf("appendToolResult wrote\n%s\nthe marshaling writes\n%s", buf.Bytes(), wantBytes)
		}
	})
}
