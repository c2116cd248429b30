package realtui

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Golden writes recorded screens and session files into a testdata
// directory with the machine-specific parts (the temporary directory the
// CLI ran in) replaced by stable placeholders, so the files can be
// committed and parsed on any machine.
type Golden struct {
	// Dir is the directory written to (created).
	Dir string
	// Replace lists old → new pairs applied in order.
	Replace [][2]string
}

// Sanitize applies Replace to s.
func (g *Golden) Sanitize(s string) string {
	for _, r := range g.Replace {
		if r[0] != "" {
			s = strings.ReplaceAll(s, r[0], r[1])
		}
	}
	return s
}

// Write sanitizes data and writes it as Dir/name.
func (g *Golden) Write(name string, data []byte) error {
	if err := os.MkdirAll(g.Dir, 0o755); err != nil {
		return fmt.Errorf("realtui: %w", err)
	}
	if err := os.WriteFile(filepath.Join(g.Dir, name), []byte(g.Sanitize(string(data))), 0o644); err != nil {
		return fmt.Errorf("realtui: %w", err)
	}
	return nil
}

// CopyFile writes the sanitized contents of the file at src as Dir/name and
// returns the sanitized length.
func (g *Golden) CopyFile(name, src string) (int, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return 0, fmt.Errorf("realtui: %w", err)
	}
	s := g.Sanitize(string(data))
	return len(s), g.Write(name, []byte(s))
}

// Clear removes everything in Dir but the entries named in keep (another
// recording's subdirectory, the fuzz corpus), for a new recording.
func (g *Golden) Clear(keep ...string) error {
	entries, err := os.ReadDir(g.Dir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("realtui: %w", err)
	}
	for _, e := range entries {
		if !slices.Contains(keep, e.Name()) {
			if err := os.RemoveAll(filepath.Join(g.Dir, e.Name())); err != nil {
				return fmt.Errorf("realtui: %w", err)
			}
		}
	}
	return nil
}
