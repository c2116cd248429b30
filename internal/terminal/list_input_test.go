package terminal

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/termapi"
)

// realInput is the fake reader with the real Codex reader's human-input
// check, so List reads a real rollout after the Session's checkpoint.
type realInput struct {
	fakeReader
	codex.Agent
	// fromAnchor counts the scans that started at the checkpoint.
	fromAnchor *atomic.Int64
}

func (r realInput) UserInputSince(ctx context.Context, p agents.Pane, cp json.RawMessage) (bool, error) {
	return r.Agent.UserInputSince(ctx, p, cp)
}

func (r realInput) UserInputFrom(ctx context.Context, p agents.Pane, cp json.RawMessage, cur native.Cursor) (native.Cursor, error) {
	if cur == (native.Cursor{}) {
		r.fromAnchor.Add(1)
	}
	return r.Agent.UserInputFrom(ctx, p, cp, cur)
}

// Agent's other methods are the fake's.
func (r realInput) Identify(ctx context.Context, p agents.Pane) (agents.Identity, error) {
	return r.fakeReader.Identify(ctx, p)
}
func (r realInput) Anchor(ctx context.Context, p agents.Pane, id agents.Identity) (json.RawMessage, error) {
	return r.fakeReader.Anchor(ctx, p, id)
}
func (r realInput) Accepted(ctx context.Context, p agents.Pane, a json.RawMessage, text string) (*agents.Acceptance, error) {
	return r.fakeReader.Accepted(ctx, p, a, text)
}
func (r realInput) Completion(ctx context.Context, p agents.Pane, a json.RawMessage, acc agents.Acceptance) (*agents.Completion, json.RawMessage, error) {
	return r.fakeReader.Completion(ctx, p, a, acc)
}
func (r realInput) WatchPaths(p agents.Pane, a json.RawMessage) []string {
	return r.fakeReader.WatchPaths(p, a)
}
func (r realInput) Screen(text string) agents.Screen   { return r.fakeReader.Screen(text) }
func (r realInput) DraftVisible(text, req string) bool { return r.fakeReader.DraftVisible(text, req) }
func (r realInput) Keys() ([]string, []string)         { return r.fakeReader.Keys() }

// ordinaryRecord is a rollout line of the kind a long Turn writes by the
// thousand: an assistant message, about 1 KiB.
var ordinaryRecord = `{"timestamp":"2026-01-01T00:00:00.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` +
	strings.Repeat("lorem ipsum ", 80) + `"}]}}` + "\n"

// managedRollout makes a managed pane whose Session's checkpoint is a real
// Codex rollout anchor with size bytes of ordinary records after it, and
// returns the service that lists it (no host runs) and the rollout's path.
func managedRollout(tb testing.TB, size int) (*Service, *fakeAgent, string, *atomic.Int64) {
	tb.Helper()
	a := newFakeAgent(termapi.AgentCodex, 310)
	r := newRig(tb, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := context.Background()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "first"})
	if err != nil {
		tb.Fatal(err)
	}
	a.finish("done", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	r.stop()
	<-r.done

	path := filepath.Join(tb.TempDir(), "rollout-2026-01-01T00-00-00-"+a.thread+".jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"` + a.thread + `"}}` + "\n"); err != nil {
		tb.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		tb.Fatal(err)
	}
	anchor, _ := json.Marshal(codex.Anchor{Mode: codex.Existing, ThreadID: a.thread, Path: path, Dev: uint64(st.Dev), Ino: st.Ino,
		Offset: st.Size, FileExisted: true, CapturedAt: time.Now().UTC()})
	w := bufio.NewWriterSize(f, 1<<20)
	for n := 0; n < size; n += len(ordinaryRecord) {
		_, _ = w.WriteString(ordinaryRecord)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	sess, err := r.st.GetTermSession(ctx, res.SessionID)
	if err != nil {
		tb.Fatal(err)
	}
	sess.Binding.Checkpoint = anchor
	if err := r.st.SaveTermSession(ctx, sess); err != nil {
		tb.Fatal(err)
	}
	scans := new(atomic.Int64)
	svc := NewService(Options{Store: r.st, Terminals: r.ft, Agents: map[string]agents.Agent{termapi.AgentCodex: realInput{fakeReader: fakeReader{r.ft}, fromAnchor: scans}}})
	return svc, a, path, scans
}

// exactOffered reports whether the row offers a session_exact send.
func exactOffered(row termapi.TerminalRow) bool {
	for _, act := range row.AvailableActions {
		if act.Scope == ScopeSessionExact {
			return true
		}
	}
	return false
}

// TestParallelListsOverALargeRolloutStayBounded lists one managed pane 30
// times at once while its rollout holds 60 MB of ordinary records after
// the checkpoint: the bytes allocated meanwhile (which bound the heap's
// growth) stay under 50 MiB, where each List used to read the whole 60 MB,
// and one scan reads the rollout from the checkpoint for all 30. A human
// turn appended later is still seen.
func TestParallelListsOverALargeRolloutStayBounded(t *testing.T) {
	svc, a, path, scans := managedRollout(t, 60<<20)
	ctx := t.Context()
	const budget = 50 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for range 30 {
		wg.Go(func() {
			res, err := svc.List(ctx)
			switch {
			case err != nil:
				errs <- err
			case len(res.Terminals) != 1 || !exactOffered(res.Terminals[0]):
				errs <- fmt.Errorf("list = %+v, want the pane offered session_exact", res.Terminals)
			}
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("30 parallel lists over 60 MB after the checkpoint: %.1f MiB allocated, heap in use %.1f -> %.1f MiB",
		float64(grew)/(1<<20), float64(before.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20))
	if grew > budget {
		t.Fatalf("30 parallel lists allocated %d MiB, more than the %d MiB budget", grew>>20, budget>>20)
	}
	if n := scans.Load(); n != 1 {
		t.Fatalf("%d scans read the rollout from the checkpoint; the 30 lists should share one", n)
	}

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"human-1"}}` + "\n")
	f.Close()
	res, err := svc.List(ctx)
	if err != nil || len(res.Terminals) != 1 || exactOffered(res.Terminals[0]) {
		t.Fatalf("list after a human turn started = %+v, %v; want no session_exact", res, err)
	}
	if !strings.Contains(res.Terminals[0].ID, a.pane.TerminalID) {
		t.Fatalf("row %+v is not the pane's", res.Terminals[0])
	}
}

// BenchmarkListRepeated lists one managed pane again and again; its rollout
// holds 6 or 60 MB after the checkpoint. After the first List, which reads
// it once, a List reads only what was appended since: ns/op and B/op are
// the same for both sizes.
func BenchmarkListRepeated(b *testing.B) {
	for _, size := range []int{6 << 20, 60 << 20} {
		b.Run(fmt.Sprintf("after_checkpoint=%dMB", size>>20), func(b *testing.B) {
			svc, _, _, _ := managedRollout(b, size)
			ctx := context.Background()
			if _, err := svc.List(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := svc.List(ctx)
				if err != nil || !exactOffered(res.Terminals[0]) {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
	}
}
