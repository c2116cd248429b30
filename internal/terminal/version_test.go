package terminal

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// versionedFake is the fake reader with a version and a proven set, as
// the real readers have.
type versionedFake struct {
	fakeReader
	version string // "" fails to read it
}

func (v versionedFake) Version(agents.Pane) (string, error) {
	if v.version == "" {
		return "", errors.New("no version")
	}
	return v.version, nil
}

func (versionedFake) ProvenVersions() []string { return []string{"0.171.0"} }

func versionRig(t *testing.T, a *fakeAgent, version string, allow bool) *rig {
	t.Helper()
	r := newRig(t, a)
	r.svc = NewService(Options{Store: r.st, Terminals: r.ft, AllowUnproven: allow, DraftTimeout: time.Second,
		Agents: map[string]agents.Agent{termapi.AgentCodex: versionedFake{fakeReader{r.ft}, version}}})
	r.start(r.svc, hostpkg.Options{})
	return r
}

// TestUnprovenVersionIsRefusedByDefault: a send to an agent version the
// readers were not proven against (or whose version cannot be read) is
// refused, naming the version and the setting, and nothing is typed; the
// list shows the version.
func TestUnprovenVersionIsRefusedByDefault(t *testing.T) {
	for _, version := range []string{"0.172.0", ""} {
		t.Run("version "+version, func(t *testing.T) {
			a := newFakeAgent(termapi.AgentCodex, 760)
			r := versionRig(t, a, version, false)
			want := version
			if want == "" {
				want = unknownVersion
			}
			_, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: origin})
			if !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "codex "+want) || !strings.Contains(err.Error(), "CLAWCONNECT_TERMINAL_UNPROVEN=1") {
				t.Fatalf("send = %v", err)
			}
			if keys := a.sentKeys(); len(keys) != 0 {
				t.Fatalf("pressed %v", keys)
			}
			l, err := r.svc.List(t.Context())
			if err != nil || len(l.Terminals) != 1 || l.Terminals[0].UnprovenVersion != want {
				t.Fatalf("list = %+v, %v", l, err)
			}
		})
	}
}

// TestUnprovenVersionAllowedIsMarked: with unproven versions allowed the
// Turn runs and carries the version in status and in its callback.
func TestUnprovenVersionAllowedIsMarked(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 765)
	r := versionRig(t, a, "0.172.0", true)
	id := sendFrom(t, r, a, termapi.SendRequest{})
	a.finish("reply", false)
	v := r.waitStatus(id, termapi.TurnIdle)
	if v.UnprovenVersion != "0.172.0" {
		t.Fatalf("status = %+v", v)
	}
	cbs := callbacksOf(t, r, id)
	if len(cbs) != 1 || cbs[0].Metadata["unproven_version"] != "0.172.0" {
		t.Fatalf("callbacks = %+v", cbs)
	}
}

// TestProvenVersionIsNotMarked: the proven version sends as before, with
// no mark anywhere.
func TestProvenVersionIsNotMarked(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 770)
	r := versionRig(t, a, "0.171.0", false)
	id := sendFrom(t, r, a, termapi.SendRequest{})
	a.finish("reply", false)
	if v := r.waitStatus(id, termapi.TurnIdle); v.UnprovenVersion != "" {
		t.Fatalf("status = %+v", v)
	}
	if cbs := callbacksOf(t, r, id); len(cbs) != 1 || cbs[0].Metadata["unproven_version"] != nil {
		t.Fatalf("callbacks = %+v", cbs)
	}
	if l, _ := r.svc.List(t.Context()); l.Terminals[0].UnprovenVersion != "" {
		t.Fatalf("list = %+v", l)
	}
}
