package agentsession

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// growingRuntime registers a runtime whose every reply adds perReply new
// metadata keys, each with a value of valueLen bytes, to those in the ref.
func growingRuntime(t *testing.T, perReply, valueLen int) *Registry {
	t.Helper()
	reg := NewRegistry()
	mustRegister(t, reg, Runtime{ID: "rt", Inspect: func(_ context.Context, ref Ref) (*Observation, error) {
		md := map[string]any{}
		for i := range perReply {
			md[fmt.Sprintf("k%05d", len(ref.Metadata)+i)] = strings.Repeat("v", valueLen)
		}
		return &Observation{State: "running", Metadata: md}, nil
	}})
	return reg
}

// TestGrowingRuntimeStopsAtTheMetadataBounds drives a runtime that adds new
// metadata keys with each reply: the replies that stay within the bounds are
// taken, the first that would cross one is refused with an error naming the
// limit, and from then on the stored metadata stays what it was.
func TestGrowingRuntimeStopsAtTheMetadataBounds(t *testing.T) {
	tests := []struct {
		name             string
		perReply, length int
		wantAccepted     int
		wantProblem      string
	}{
		// ~100 KB of new keys per reply, as reported: the first reply is over.
		{"100 KB per reply", 100, 1000, 0, "metadata would take 101219 bytes, over the limit of 65536"},
		{"key count", 100, 10, 2, "metadata would hold 301 keys, over the limit of 256"},
		{"encoded size", 20, 1000, 3, "metadata would take 80979 bytes, over the limit of 65536"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bb := newBookBundle(t, growingRuntime(t, tc.perReply, tc.length))
			bb.apply(t, "k", "job1", `<agent-session>{"runtime":"rt","sessionId":"s1","metadata":{"origin":"marker"}}</agent-session>`)
			kept := map[string]string{"origin": "marker"}
			accepted := 0
			for i := range 20 {
				st, err := bb.book.Observe(t.Context(), "k", Request{Op: OpInspect})
				if err != nil {
					t.Fatal(err)
				}
				cur := bb.lineage(t, "k")[0]
				if st.Error == nil {
					if accepted != i {
						t.Fatalf("reply %d taken after a refused one", i+1)
					}
					accepted++
					kept = cur.Metadata
					continue
				}
				if st.Error.Code != FailedCode(OpInspect) || !strings.Contains(st.Error.Message, tc.wantProblem) ||
					!strings.Contains(st.Error.Message, "runtime rt: reply refused") ||
					!strings.Contains(st.Error.Message, "the stored metadata is kept") {
					t.Fatalf("reply %d: error %+v, want %s naming %q", i+1, st.Error, FailedCode(OpInspect), tc.wantProblem)
				}
				if cur.Error == nil || cur.Error.Message != st.Error.Message {
					t.Fatalf("reply %d: record error %+v, want the refusal", i+1, cur.Error)
				}
				if !maps.Equal(cur.Metadata, kept) {
					t.Fatalf("reply %d changed the stored metadata: %d keys, want the %d kept", i+1, len(cur.Metadata), len(kept))
				}
				if cur.Status != AttachmentStatus(StateRunning) && accepted > 0 {
					t.Fatalf("status %q, want running kept", cur.Status)
				}
			}
			if accepted != tc.wantAccepted {
				t.Errorf("accepted %d replies, want %d", accepted, tc.wantAccepted)
			}
			if len(kept) > MetadataMaxKeys || metadataSize(kept) > MetadataMaxBytes {
				t.Errorf("stored metadata %d keys, %d bytes: over the bounds", len(kept), metadataSize(kept))
			}
		})
	}
}

// TestReplyWithoutMetadataIsNotRefusedForStoredMetadata: the bound is on
// what a reply adds; a reply that adds nothing passes whatever is stored.
func TestReplyWithoutMetadataIsNotRefusedForStoredMetadata(t *testing.T) {
	big := map[string]string{}
	for i := range MetadataMaxKeys + 1 {
		big[fmt.Sprint(i)] = "x"
	}
	if err := CheckObservation(Ref{Metadata: big}, &Observation{State: "running"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckObservation(Ref{Metadata: big}, &Observation{Metadata: map[string]any{"0": "y"}}); !errors.Is(err, ErrInvalidReply) {
		t.Fatalf("a reply with metadata over the bound: %v, want ErrInvalidReply", err)
	}
}

func TestCheckObservationFields(t *testing.T) {
	tests := []struct {
		name string
		obs  Observation
		want string // "" = valid
	}{
		{"all empty", Observation{}, ""},
		{"good values", Observation{ProviderSessionID: "0199a6c2-7b1e-7c4d-9a3f-2b8e4f1d6c0a", Host: "box-1.example.com:8443",
			RemoteURL: "https://claude.ai/code/session_01abc?tab=logs&view=full#L10"}, ""},
		{"ipv6 host and http url", Observation{Host: "[::1]:22", RemoteURL: "HTTP://[::1]:8080/s"}, ""},
		{"url of the longest length", Observation{RemoteURL: "https://h/" + strings.Repeat("a", RemoteURLMax-len("https://h/"))}, ""},
		{"providerSessionId path", Observation{ProviderSessionID: "../etc"}, "providerSessionId is not a safe handle"},
		{"providerSessionId too long", Observation{ProviderSessionID: strings.Repeat("a", 129)}, "providerSessionId is not a safe handle"},
		{"providerSessionId escape", Observation{ProviderSessionID: "a\x1b[2J"}, "providerSessionId is not a safe handle"},
		{"host escape", Observation{Host: "box\x1b]0;pwned\x07"}, "host may hold only"},
		{"host userinfo", Observation{Host: "user:pw@box"}, "host may hold only"},
		{"host space", Observation{Host: "box 1"}, "host may hold only"},
		{"host non-ASCII", Observation{Host: "bo\u202ex"}, "host may hold only"},
		{"host too long", Observation{Host: strings.Repeat("a", HostMax+1)}, "host is 256 bytes long, over the limit of 255"},
		{"url too long", Observation{RemoteURL: "https://h/" + strings.Repeat("a", RemoteURLMax)}, "remoteUrl is 2058 bytes long, over the limit of 2048"},
		{"url userinfo", Observation{RemoteURL: "https://user:hunter2@h.example/s"}, "remoteUrl carries user information"},
		{"url bare user", Observation{RemoteURL: "https://tok3n@h.example/s"}, "remoteUrl carries user information"},
		{"url query token", Observation{RemoteURL: "https://h.example/s?id=1&access_token=hunter2"}, "query or fragment parameter named like a credential"},
		{"url escaped query name", Observation{RemoteURL: "https://h.example/s?tok%65n=hunter2"}, "named like a credential"},
		{"url fragment key", Observation{RemoteURL: "https://h.example/s#api_key=hunter2"}, "named like a credential"},
		{"url escape sequence", Observation{RemoteURL: "https://h.example/\x1b[31mred"}, "remoteUrl holds a space, a control character"},
		{"url space", Observation{RemoteURL: "https://h.example/a b"}, "remoteUrl holds a space"},
		{"url non-ASCII", Observation{RemoteURL: "https://h.example/\u202e"}, "non-ASCII"},
		{"url javascript", Observation{RemoteURL: "javascript:alert(1)"}, "not an absolute http or https URL"},
		{"url relative", Observation{RemoteURL: "/s/1"}, "not an absolute http or https URL"},
		{"url file", Observation{RemoteURL: "file:///etc/passwd"}, "not an absolute http or https URL"},
		{"url without host", Observation{RemoteURL: "https:///s"}, "not an absolute http or https URL"},
		{"several problems", Observation{ProviderSessionID: "a/b", RemoteURL: "ftp://h/"},
			"providerSessionId is not a safe handle (1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit); remoteUrl is not an absolute http or https URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckObservation(Ref{Runtime: "rt", SessionID: "s"}, &tc.obs)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckObservation() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidReply) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckObservation() = %v, want ErrInvalidReply saying %q", err, tc.want)
			}
			for _, secret := range []string{"hunter2", "\x1b", "pwned", "\u202e", "tok3n", "etc"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error quotes the refused value: %q", err)
				}
			}
		})
	}
}

// TestDispatchRefusesABadReplyWhole: a refused reply becomes <op>_failed
// with nothing of it kept, and the write-back leaves the record's fields as
// they were.
func TestDispatchRefusesABadReplyWhole(t *testing.T) {
	reg := NewRegistry()
	bad := &Observation{State: "needs_input", LatestResponse: "approve?", Host: "box",
		RemoteURL: "https://u:hunter2@h.example/s", Metadata: map[string]any{"a": "2"}}
	mustRegister(t, reg, Runtime{ID: "rt", Inspect: inspectReturning(bad, nil)})
	bb := newBookBundle(t, reg)
	bb.apply(t, "k", "job1", `[[clawconnect:agent-session]]{"op":"attach","runtime":"rt","handle":"s1","host":"h1",`+
		`"remoteUrl":"https://h.example/ok","metadata":{"a":"1"},"status":"running"}[[/clawconnect:agent-session]]`)
	before := bb.lineage(t, "k")[0]
	st, err := bb.book.Observe(t.Context(), "k", Request{Op: OpInspect})
	if err != nil {
		t.Fatal(err)
	}
	if st.Error == nil || st.Error.Code != "inspect_failed" || st.State != StateUnavailable ||
		!strings.Contains(st.Error.Message, "remoteUrl carries user information") ||
		!strings.Contains(st.Detail, "refused; nothing in it was recorded") || st.LatestResponse != "" {
		t.Fatalf("status %+v", st)
	}
	after := bb.lineage(t, "k")[0]
	before.Error, before.ObservationToken, before.LastObservedAt = after.Error, after.ObservationToken, after.LastObservedAt
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("a refused reply changed the record (-before +after):\n%s", diff)
	}
	if strings.Contains(fmt.Sprint(after), "hunter2") {
		t.Errorf("the record carries the refused credential: %+v", after)
	}
	if b, ok := BlockedDelegationFor("job1", true, &after); ok {
		t.Errorf("a refused reply blocked the job: %+v", b)
	}
}

// TestDispatchTakesACallbackErrorWrappingErrInvalidReply: a refusal made
// before dispatch (by the module loader, naming the module) is recorded the
// same way.
func TestDispatchTakesACallbackErrorWrappingErrInvalidReply(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, Runtime{ID: "rt", Inspect: inspectReturning(nil, fmt.Errorf("module m: %w: host may hold only …", ErrInvalidReply))})
	st := reg.Dispatch(t.Context(), Ref{Runtime: "rt", SessionID: "s"}, Request{Op: OpInspect}, CallOptions{})
	if st.Error == nil || st.Error.Code != "inspect_failed" || st.Error.Message != "module m: reply refused: host may hold only …" ||
		!strings.Contains(st.Detail, "refused") {
		t.Fatalf("status %+v", st)
	}
}

// TestWriteBackNeverStoresMetadataOverTheBounds holds the bound at the store
// for a status that did not come through Dispatch.
func TestWriteBackNeverStoresMetadataOverTheBounds(t *testing.T) {
	bb := newBookBundle(t, nil)
	bb.apply(t, "k", "job1", markerS1)
	g, _, _, err := bb.book.Begin(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{}
	for i := range MetadataMaxKeys + 1 {
		md[fmt.Sprint(i)] = "x"
	}
	ok, err := bb.book.WriteBack(t.Context(), "k", g, Status{Runtime: "rt", State: StateIdle, Metadata: md})
	if err != nil || !ok {
		t.Fatalf("WriteBack() = %v, %v", ok, err)
	}
	cur := bb.lineage(t, "k")[0]
	if cur.Metadata != nil || cur.Status != "running" || cur.Error == nil ||
		!strings.Contains(cur.Error.Message, "metadata would hold 257 keys, over the limit of 256") {
		t.Fatalf("record %+v", cur)
	}
}

func TestHandoffMetadataBounds(t *testing.T) {
	many := func(n int) string {
		kv := make([]string, n)
		for i := range kv {
			kv[i] = fmt.Sprintf(`"m%d":"v"`, i)
		}
		return "{" + strings.Join(kv, ",") + "}"
	}
	h := ParseHandoff(`<agent-session>{"runtime":"rt","sessionId":"s1","metadata":` + many(MetadataMaxKeys+1) + `}</agent-session>`)
	if h.Directive != nil || !errors.Is(h.Err, ErrMalformedHandoff) || !strings.Contains(h.Err.Error(), "over the limit of 256") {
		t.Fatalf("marker over the bound: %+v", h)
	}
	h = ParseHandoff(`[[clawconnect:agent-session]]{"op":"attach","runtime":"rt","handle":"s1","host":"h","metadata":{"m":"` +
		strings.Repeat("x", MetadataMaxBytes) + `"}}[[/clawconnect:agent-session]]`)
	if h.Directive != nil || !strings.Contains(fmt.Sprint(h.Err), "over the limit of 65536") {
		t.Fatalf("directive over the bound: %+v", h)
	}

	// Refreshes merge: attaching the same session again with new keys each
	// time stops at the bound, keeping what is stored.
	bb := newBookBundle(t, nil)
	for i := 0; ; i++ {
		kv := make([]string, 100)
		for j := range kv {
			kv[j] = fmt.Sprintf(`"r%d-%d":"v"`, i, j)
		}
		d := ParseHandoff(`<agent-session>{"runtime":"rt","sessionId":"s1","metadata":{` + strings.Join(kv, ",") + `}}</agent-session>`).Directive
		before := bb.lineage(t, "k")
		_, err := bb.book.Apply(t.Context(), "k", "job1", d)
		if i < 2 {
			if err != nil {
				t.Fatalf("attach %d: %v", i+1, err)
			}
			continue
		}
		if !errors.Is(err, ErrMalformedHandoff) || !strings.Contains(err.Error(), "metadata would hold 300 keys, over the limit of 256") {
			t.Fatalf("attach %d: %v, want a refusal", i+1, err)
		}
		if diff := cmp.Diff(before, bb.lineage(t, "k")); diff != "" {
			t.Fatalf("a refused attach changed the lineage (-before +after):\n%s", diff)
		}
		break
	}
}

// TestMetadataStoredOverTheBoundsIsNotAWedge: a record that holds metadata
// over the bounds (written before they existed) still takes replies that add
// none, and keeps refusing replies that add some.
func TestMetadataStoredOverTheBoundsIsNotAWedge(t *testing.T) {
	reg := NewRegistry()
	var reply atomic.Pointer[Observation]
	mustRegister(t, reg, Runtime{ID: "rt", Inspect: func(context.Context, Ref) (*Observation, error) { return reply.Load(), nil }})
	bb := newBookBundle(t, reg)
	bb.apply(t, "k", "job1", markerS1)
	rec := bb.lineage(t, "k")[0]
	rec.Metadata = map[string]string{}
	for i := range 2000 {
		rec.Metadata[fmt.Sprintf("k%04d", i)] = "v"
	}
	if err := bb.store.SaveAttachments(t.Context(), AttachmentWrite{SessionKey: "k", ExpectVersion: 1, CurrentID: rec.ID, Records: []Attachment{rec}}); err != nil {
		t.Fatal(err)
	}

	reply.Store(&Observation{State: "idle"})
	if st, err := bb.book.Observe(t.Context(), "k", Request{Op: OpInspect}); err != nil || st.Error != nil {
		t.Fatalf("a reply without metadata: %+v, %v", st, err)
	}
	if cur := bb.lineage(t, "k")[0]; cur.Status != "idle" || len(cur.Metadata) != 2000 || cur.Error != nil {
		t.Fatalf("record %s with %d metadata keys, error %+v; want idle with the 2000 kept", cur.Status, len(cur.Metadata), cur.Error)
	}
	reply.Store(&Observation{State: "running", Metadata: map[string]any{"k0000": "w"}})
	st, err := bb.book.Observe(t.Context(), "k", Request{Op: OpInspect})
	if err != nil || st.Error == nil || !strings.Contains(st.Error.Message, "metadata would hold 2000 keys, over the limit of 256") {
		t.Fatalf("a reply with metadata: %+v, %v", st, err)
	}
	if cur := bb.lineage(t, "k")[0]; cur.Status != "idle" || cur.Metadata["k0000"] != "v" {
		t.Fatalf("a refused reply changed the record: %s, k0000=%q", cur.Status, cur.Metadata["k0000"])
	}
}
