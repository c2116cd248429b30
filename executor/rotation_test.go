package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestShouldRotate(t *testing.T) {
	tests := []struct {
		name string
		in   RotationTrigger
		want bool
	}{
		{"below watermark", RotationTrigger{84, 100, 0.85}, false},
		{"at watermark", RotationTrigger{85, 100, 0.85}, true},
		{"above", RotationTrigger{199_000, 200_000, 0.85}, true},
		{"no window is inert", RotationTrigger{1 << 40, 0, 0.85}, false},
		{"no threshold is inert", RotationTrigger{100, 100, 0}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShouldRotate(tt.in); got != tt.want {
				t.Errorf("ShouldRotate(%+v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestRotationFor(t *testing.T) {
	window := Capabilities{ContextWindowTokens: 200_000}
	tests := []struct {
		name      string
		done      Done
		tokens    int64
		caps      Capabilities
		rotations int
		want      RotationReason
		wantOK    bool
	}{
		{"max turns", Done{Reason: DoneMaxTurns}, 0, Capabilities{}, 0, RotateMaxTurns, true},
		{"error over watermark", Done{Reason: DoneError}, 180_000, window, 0, RotateContextWatermark, true},
		{"success over watermark stays", Done{Reason: DoneSuccess}, 180_000, window, 0, "", false},
		{"error without window stays", Done{Reason: DoneError}, 180_000, Capabilities{}, 0, "", false},
		{"chain bounded", Done{Reason: DoneMaxTurns}, 0, window, DefaultMaxRotations, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RotationFor(tt.done, tt.tokens, tt.caps, tt.rotations, RotationPolicy{})
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RotationFor = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestBuildRotationHandoffNote(t *testing.T) {
	h := RotationHandoff{Reason: RotateContextWatermark, RotationIndex: 2, LastSummary: "wrote tests"}
	want := "Session handoff (rotation): the previous session reached its context limit.\n" +
		"- Reason: context_watermark\n- Rotation: #2\n- Last progress: wrote tests\n" +
		"Pick the task up from its current state; pull in only the context you actually need instead of replaying the full history."
	if diff := cmp.Diff(want, BuildRotationHandoffNote(h)); diff != "" {
		t.Errorf("note (-want +got):\n%s", diff)
	}
	h.LastSummary = ""
	want = "Session handoff (rotation): the previous session reached its context limit.\n" +
		"- Reason: context_watermark\n- Rotation: #2\n" +
		"Pick the task up from its current state; pull in only the context you actually need instead of replaying the full history."
	if diff := cmp.Diff(want, BuildRotationHandoffNote(h)); diff != "" {
		t.Errorf("note without summary (-want +got):\n%s", diff)
	}
}

type codecAdapter struct {
	stubAdapter
	err error
}

func (c codecAdapter) SerializeSession(_ context.Context, run *RunHandle) (string, error) {
	return "blob:" + run.SessionKey, c.err
}
func (c codecAdapter) RestoreSession(context.Context, string) (*RunHandle, error) { return nil, nil }

func TestRotateSession(t *testing.T) {
	cur := NewRunHandle("x", "k")
	next := NewRunHandle("x", "k:r1")
	var gotNote string
	var rec RotationRecord
	h := RotationHandoff{Reason: RotateMaxTurns, RotationIndex: 1}
	got, err := RotateSession(t.Context(), RotateOptions{
		Adapter: codecAdapter{stubAdapter: stubAdapter{id: "x"}},
		Current: cur, Handoff: h,
		Restart: func(_ context.Context, note string) (*RunHandle, error) { gotNote = note; return next, nil },
		RecordRotation: func(_ context.Context, r RotationRecord) error {
			rec = r
			return errors.New("lineage store down") // swallowed
		},
	})
	if err != nil || got != next {
		t.Fatalf("RotateSession = %v, %v; want successor", got, err)
	}
	if gotNote != BuildRotationHandoffNote(h) {
		t.Errorf("restart got note %q", gotNote)
	}
	if rec.Serialized != "blob:k" || rec.Successor != next {
		t.Errorf("record = %+v", rec)
	}

	// A failing serialize leaves Serialized empty; a failing restart propagates.
	boom := errors.New("boom")
	_, err = RotateSession(t.Context(), RotateOptions{
		Adapter: codecAdapter{stubAdapter: stubAdapter{id: "x"}, err: boom}, Current: cur, Handoff: h,
		Restart: func(context.Context, string) (*RunHandle, error) { return nil, boom },
	})
	if !errors.Is(err, boom) {
		t.Errorf("RotateSession error = %v, want boom", err)
	}
}
