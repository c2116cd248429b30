package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Scan limits: bytes read after an anchor.
const (
	// MaxAcceptanceScan is the most bytes ScanAcceptance reads after the
	// anchor.
	MaxAcceptanceScan = 16 << 20
	// MaxCompletionScan is the most bytes ScanCompletion reads after the
	// anchor.
	MaxCompletionScan = 256 << 20
	// MaxMetaLine is the longest first (session_meta) line read.
	MaxMetaLine = 1 << 20
	// MaxOpenRollouts is the most open rollout files one process may hold
	// before the inventory refuses it.
	MaxOpenRollouts = 128
)

// The values of a TUI root thread's session_meta.
const (
	OriginatorTUI = "codex-tui"
	SourceCLI     = "cli"
)

// SessionMeta is the payload of a rollout's first record.
type SessionMeta struct {
	// ID is the thread id (a UUID; also the end of the file name).
	ID string `json:"id"`
	// Timestamp is when the session started (payload.timestamp).
	Timestamp time.Time `json:"timestamp"`
	// RecordedAt is when the session_meta record was written (the
	// record's own timestamp): no earlier than the first prompt's Enter,
	// since Codex creates the rollout at the first prompt.
	RecordedAt time.Time `json:"recorded_at"`
	// Cwd is the workspace the thread runs in.
	Cwd string `json:"cwd"`
	// Originator is "codex-tui" for the TUI, "codex_exec" for exec.
	Originator string `json:"originator"`
	// CLIVersion is the Codex version that wrote the file.
	CLIVersion string `json:"cli_version"`
	// Source is "cli" for the TUI, "exec" for exec; "" when the source is
	// an object (a sub-agent thread, see Subagent).
	Source string `json:"source"`
	// Subagent reports a child thread (source is an object naming a
	// subagent).
	Subagent bool `json:"subagent"`
}

// rawMeta mirrors the session_meta record for decoding.
type rawMeta struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		ID         string          `json:"id"`
		Timestamp  string          `json:"timestamp"`
		Cwd        string          `json:"cwd"`
		Originator string          `json:"originator"`
		CLIVersion string          `json:"cli_version"`
		Source     json.RawMessage `json:"source"`
	} `json:"payload"`
}

// ParseSessionMeta decodes a rollout's first line.
func ParseSessionMeta(line []byte) (SessionMeta, error) {
	var r rawMeta
	if err := json.Unmarshal(line, &r); err != nil {
		return SessionMeta{}, fmt.Errorf("parse session_meta: %w", err)
	}
	if r.Type != "session_meta" {
		return SessionMeta{}, fmt.Errorf("parse session_meta: first record has type %q, want session_meta", r.Type)
	}
	p := r.Payload
	if p.ID == "" {
		return SessionMeta{}, errors.New("parse session_meta: payload.id is missing")
	}
	m := SessionMeta{ID: strings.ToLower(p.ID), Cwd: p.Cwd, Originator: p.Originator, CLIVersion: p.CLIVersion}
	if p.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, p.Timestamp)
		if err != nil {
			return SessionMeta{}, fmt.Errorf("parse session_meta: payload.timestamp: %w", err)
		}
		m.Timestamp = t
	}
	if r.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, r.Timestamp)
		if err != nil {
			return SessionMeta{}, fmt.Errorf("parse session_meta: timestamp: %w", err)
		}
		m.RecordedAt = t
	}
	if len(p.Source) > 0 {
		var s string
		if json.Unmarshal(p.Source, &s) == nil {
			m.Source = s
		} else {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(p.Source, &obj); err != nil {
				return SessionMeta{}, fmt.Errorf("parse session_meta: payload.source is neither a string nor an object")
			}
			_, m.Subagent = obj["subagent"]
		}
	}
	return m, nil
}

// ReadSessionMeta reads and decodes the first line of the rollout at path,
// a regular file (not a symlink; a FIFO is refused, not waited on).
func ReadSessionMeta(path string) (SessionMeta, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return SessionMeta{}, fmt.Errorf("read session_meta: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return SessionMeta{}, fmt.Errorf("read session_meta: %s is not a regular file", path)
	}
	return readMeta(f, path)
}

func readMeta(f io.Reader, path string) (SessionMeta, error) {
	buf := make([]byte, 0, 16<<10)
	chunk := make([]byte, 16<<10)
	for {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			return ParseSessionMeta(buf[:i])
		}
		if len(buf) > MaxMetaLine {
			return SessionMeta{}, fmt.Errorf("read session_meta: %s: first line longer than %d bytes", path, MaxMetaLine)
		}
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err == io.EOF {
			return SessionMeta{}, fmt.Errorf("read session_meta: %s: no complete first line yet", path)
		}
		if err != nil {
			return SessionMeta{}, fmt.Errorf("read session_meta: %s: %w", path, err)
		}
	}
}

// rolloutName matches a rollout file name and captures its thread id.
var rolloutName = lazyRE(`^rollout-.*-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$`)

// IsRolloutName reports whether base is a rollout file name.
func IsRolloutName(base string) bool {
	return strings.HasPrefix(base, "rollout-") && strings.HasSuffix(base, ".jsonl")
}

// ThreadIDFromName returns the thread id at the end of a rollout file name,
// lowercased, or "" when the name has none.
func ThreadIDFromName(base string) string {
	m := rolloutName().FindStringSubmatch(base)
	if m == nil {
		return ""
	}
	return strings.ToLower(m[1])
}
