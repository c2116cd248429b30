package agentsession

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func benchContext(withMarker bool) string {
	filler := strings.Repeat("Some ordinary task context, with {braces} and <tags>.\n", (64<<10)/54)
	if !withMarker {
		return filler
	}
	half := len(filler) / 2
	return filler[:half] + `<agent-session>{"runtime":"rt","sessionId":"s1","state":"running","metadata":{"a":"b"}}</agent-session>` + filler[half:]
}

// BenchmarkParseHandoff parses and strips a 64 KiB context.
func BenchmarkParseHandoff(b *testing.B) {
	for _, tc := range []struct {
		name   string
		marker bool
	}{{"64KiB-no-marker", false}, {"64KiB-marker", true}} {
		in := benchContext(tc.marker)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				h := ParseHandoff(in)
				if (h.Directive != nil) != tc.marker {
					b.Fatal("unexpected parse result")
				}
			}
		})
	}
	hostile := strings.Repeat(MarkerOpen+"{ ", (1<<20)/18)
	b.Run("1MiB-hostile", func(b *testing.B) {
		b.SetBytes(int64(len(hostile)))
		for b.Loop() {
			ParseHandoff(hostile)
		}
	})
}

// BenchmarkNormalize normalizes a typical completed-turn reply.
func BenchmarkNormalize(b *testing.B) {
	var obs Observation
	if err := json.Unmarshal([]byte(`{"state":"completed","alive":false,"finalResponse":"done","lastEventAt":"2026-01-02T03:04:05Z","metadata":{"n":2}}`), &obs); err != nil {
		b.Fatal(err)
	}
	ref := Ref{Runtime: "rt", Provider: "p", SessionID: "s", Metadata: map[string]string{"k": "v"}}
	b.ReportAllocs()
	for b.Loop() {
		Normalize(ref, &obs, testNow)
	}
}

// BenchmarkWriteBack measures one accepted compare-and-set write through the
// book into the memory store.
func BenchmarkWriteBack(b *testing.B) {
	ctx := context.Background()
	book, err := NewBook(ctx, NewMemoryStore(), BookOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer book.Close()
	cur, err := book.Apply(ctx, "k", "job", ParseHandoff(markerS1).Directive)
	if err != nil {
		b.Fatal(err)
	}
	st := Status{State: StateRunning, Alive: Bool(true), LatestResponse: "working", LastEventAt: 1}
	b.ReportAllocs()
	for b.Loop() {
		g := Guard{AttachmentID: cur.ID, DelegatedTurnID: "job", Token: book.NextToken()}
		if ok, err := book.WriteBack(ctx, "k", g, st); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
