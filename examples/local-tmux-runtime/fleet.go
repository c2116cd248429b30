package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
)

// Fleet inspects sessions of a local fleet: each session is a tmux session
// named by its handle, and <Home>/<handle>/meta.json names its transcript.
type Fleet struct {
	// Home is the fleet home directory.
	Home string
	// Tmux is the tmux command prefix, e.g. {"tmux"} or {"tmux", "-L", "sock"}.
	Tmux []string
}

// maxTranscriptBytes bounds how much of a transcript's end is read.
const maxTranscriptBytes = 64 << 20

var handleRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// notAlive is the answer to every failure: the session is not known to be
// alive, and nothing else is claimed.
func notAlive() *agentsession.Observation {
	return &agentsession.Observation{Alive: agentsession.Bool(false)}
}

// Inspect reports one session. It never returns an error for a session it
// cannot read: it answers alive:false instead.
//
//  1. A handle that is not a plain path segment is rejected before anything
//     is executed.
//  2. While the tmux session exists the answer is alive:true with no state:
//     a liveness bit cannot tell working from waiting, so it must not
//     overwrite a status the host stated.
//  3. Only once the pane has ended is the transcript read (a live pane's
//     transcript can still change under the read): meta.json's
//     transcriptPath must stay inside the fleet home, and the newest
//     assistant entry with text and a parsable timestamp is the answer,
//     dated by that entry's own timestamp.
func (f Fleet) Inspect(ctx context.Context, ref agentsession.Ref) (*agentsession.Observation, error) {
	handle := ref.SessionID
	if !handleRE.MatchString(handle) || ctx.Err() != nil {
		return notAlive(), nil
	}
	live, err := f.hasSession(ctx, handle)
	if err != nil {
		return nil, err
	}
	if live {
		return &agentsession.Observation{Alive: agentsession.Bool(true)}, nil
	}
	if ctx.Err() != nil {
		return notAlive(), nil
	}
	path, ok := f.transcriptPath(handle)
	if !ok {
		return notAlive(), nil
	}
	text, at, ok := newestAnswer(ctx, path)
	if !ok {
		return notAlive(), nil
	}
	return &agentsession.Observation{
		State:         string(agentsession.StateCompleted),
		Alive:         agentsession.Bool(false),
		FinalResponse: text,
		LastEventAt:   agentsession.Millis(at.UnixMilli()),
	}, nil
}

// hasSession runs tmux has-session for exactly handle ("=" disables tmux's
// prefix matching, so s1 never matches a live s10). A non-zero exit means
// the session is gone; tmux failing to run at all is an error, because then
// nobody knows whether the pane ended.
func (f Fleet) hasSession(ctx context.Context, handle string) (bool, error) {
	args := append(append([]string{}, f.Tmux[1:]...), "has-session", "-t", "="+handle)
	cmd := exec.CommandContext(ctx, f.Tmux[0], args...)
	err := cmd.Run()
	if err == nil {
		return true, nil
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) || ctx.Err() != nil {
		return false, nil
	}
	return false, err
}

// transcriptPath reads <home>/<handle>/meta.json and returns its
// transcriptPath resolved against the fleet home, if it stays inside it
// (lexically and after resolving symlinks).
func (f Fleet) transcriptPath(handle string) (string, bool) {
	base, err := filepath.Abs(f.Home)
	if err != nil {
		return "", false
	}
	raw, err := os.ReadFile(filepath.Join(base, handle, "meta.json"))
	if err != nil {
		return "", false
	}
	var meta struct {
		TranscriptPath any `json:"transcriptPath"`
	}
	if json.Unmarshal(raw, &meta) != nil {
		return "", false
	}
	tp, _ := meta.TranscriptPath.(string)
	if tp == "" {
		return "", false
	}
	p := tp
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	if !inside(base, p) {
		return "", false
	}
	realBase, err1 := filepath.EvalSymlinks(base)
	realP, err2 := filepath.EvalSymlinks(p)
	if err1 != nil || err2 != nil || !inside(realBase, realP) {
		return "", false
	}
	return p, true
}

func inside(base, p string) bool {
	return p == base || strings.HasPrefix(p, base+string(filepath.Separator))
}

// transcriptEntry is the part of a transcript line the module reads.
type transcriptEntry struct {
	Type      string `json:"type"`
	Timestamp any    `json:"timestamp"`
	Message   struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// newestAnswer scans the transcript from its newest line backwards for an
// assistant entry with text and a parsable timestamp.
func newestAnswer(ctx context.Context, path string) (string, time.Time, bool) {
	data, err := readTail(path, maxTranscriptBytes)
	if err != nil {
		return "", time.Time{}, false
	}
	lines := bytes.Split(data, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if i%1024 == 0 && ctx.Err() != nil {
			return "", time.Time{}, false
		}
		line := bytes.TrimSpace(lines[i])
		if len(line) == 0 {
			continue
		}
		var e transcriptEntry
		if json.Unmarshal(line, &e) != nil || e.Type != "assistant" {
			continue
		}
		var blocks []struct {
			Type string `json:"type"`
			Text any    `json:"text"`
		}
		if json.Unmarshal(e.Message.Content, &blocks) != nil {
			continue
		}
		var parts []string
		for _, b := range blocks {
			if s, ok := b.Text.(string); ok && b.Type == "text" {
				parts = append(parts, s)
			}
		}
		text := strings.TrimSpace(strings.Join(parts, "\n"))
		if text == "" {
			continue
		}
		ts, _ := e.Timestamp.(string)
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue // never given a made-up date
		}
		return text, at, true
	}
	return "", time.Time{}, false
}

// readTail reads the last max bytes of path, dropping a cut first line.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() <= max {
		return io.ReadAll(f)
	}
	if _, err := f.Seek(st.Size()-max, io.SeekStart); err != nil {
		return nil, err
	}
	r := bufio.NewReader(f)
	if _, err := r.ReadBytes('\n'); err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
