package codex

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// notInRollouts are the permission bits a rollout must not have: one
// writable by another user could be forged.
const notInRollouts = 0o022

// OpenFile is one file a process holds open, as /proc/<pid>/fd shows it:
// the link target (with a " (deleted)" suffix when unlinked) and the
// device and inode of the open file (stat of the fd link).
type OpenFile struct {
	FD   int    `json:"fd"`
	Path string `json:"path"`
	Dev  uint64 `json:"device"`
	Ino  uint64 `json:"inode"`
}

// InventoryInput is what TakeInventory needs to know about one Codex
// process.
type InventoryInput struct {
	// CodexHome is $CODEX_HOME (default ~/.codex) of the process.
	CodexHome string
	// Cwd is the process's working directory; a root rollout's session_meta
	// must name it.
	Cwd string
	// OpenFiles are the process's open files; only rollout files matter.
	OpenFiles []OpenFile
}

// InventoryStatus is the outcome of an open-root rollout inventory.
type InventoryStatus string

// The inventory statuses.
const (
	// VerifiedAbsent: the process holds no rollout open (a virgin TUI that
	// has not received its first prompt).
	VerifiedAbsent InventoryStatus = "verified_absent"
	// Resolved: exactly one root rollout; it is the pane's thread.
	Resolved InventoryStatus = "resolved"
	// Unbound: several root rollouts; the foreground thread is unknown.
	Unbound InventoryStatus = "unbound"
)

// ReasonMultipleRoots is Inventory.Reason when Status is Unbound.
const ReasonMultipleRoots = "multiple_open_root_rollouts"

// Rollout is one verified root rollout.
type Rollout struct {
	// Path is the rollout's absolute path.
	Path string `json:"path"`
	// Dev and Ino identify the open file.
	Dev uint64 `json:"device"`
	Ino uint64 `json:"inode"`
	// ThreadID is the thread id (session_meta id, equal to the name's).
	ThreadID string `json:"native_thread_id"`
	// Meta is the rollout's session_meta.
	Meta SessionMeta `json:"-"`
}

// Skipped is an open rollout the inventory left out, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Inventory is the set of root rollouts a Codex process holds open.
type Inventory struct {
	// Status is the outcome.
	Status InventoryStatus `json:"status"`
	// Reason explains Unbound.
	Reason string `json:"reason,omitempty"`
	// Roots are the verified root rollouts, sorted by path.
	Roots []Rollout `json:"roots"`
	// Skipped are open rollouts that are not roots (sub-agent threads).
	Skipped []Skipped `json:"skipped,omitempty"`
	// Fingerprint is the lowercase hex SHA-256 of the JSON of Status, Cwd
	// and the roots' identities; equal fingerprints mean the same binding
	// evidence.
	Fingerprint string `json:"fingerprint"`
}

// TakeInventory finds the root rollouts among a process's open files.
// The same file open on several descriptors counts once. Every open
// rollout must be a regular, undeleted file inside
// realpath($CODEX_HOME/sessions) whose open file (device, inode) is the one
// at its path, whose session_meta id equals the id in its name, and which
// is either a sub-agent thread (skipped) or a TUI root (originator
// codex-tui, source cli) for in.Cwd. Anything else, more than
// MaxOpenRollouts rollouts, or two roots with one thread or inode is an
// error: the inventory never guesses.
func TakeInventory(in InventoryInput) (Inventory, error) {
	if in.CodexHome == "" || in.Cwd == "" {
		return Inventory{}, fmt.Errorf("codex inventory: CodexHome and Cwd are required")
	}
	var candidates []OpenFile
	seen := map[OpenFile]bool{}
	for _, f := range in.OpenFiles {
		path := strings.TrimSuffix(f.Path, " (deleted)")
		if !IsRolloutName(filepath.Base(path)) {
			continue
		}
		// Codex 0.171 may hold its rollout open on two descriptors: the same
		// path and file count once.
		if k := (OpenFile{Path: f.Path, Dev: f.Dev, Ino: f.Ino}); !seen[k] {
			seen[k] = true
			candidates = append(candidates, f)
		}
	}
	if len(candidates) > MaxOpenRollouts {
		return Inventory{}, fmt.Errorf("codex inventory: the process holds %d rollouts open (more than %d)", len(candidates), MaxOpenRollouts)
	}
	inv := Inventory{Roots: []Rollout{}}
	if len(candidates) > 0 {
		sessions, err := filepath.EvalSymlinks(filepath.Join(in.CodexHome, "sessions"))
		if err != nil {
			return Inventory{}, fmt.Errorf("codex inventory: resolve $CODEX_HOME/sessions: %w", err)
		}
		cwd := filepath.Clean(in.Cwd)
		for _, f := range candidates {
			r, skip, err := verifyOpen(f, sessions, cwd)
			if err != nil {
				return Inventory{}, fmt.Errorf("codex inventory: %w", err)
			}
			if skip != "" {
				inv.Skipped = append(inv.Skipped, Skipped{Path: f.Path, Reason: skip})
				continue
			}
			inv.Roots = append(inv.Roots, r)
		}
	}
	sort.Slice(inv.Roots, func(i, j int) bool { return inv.Roots[i].Path < inv.Roots[j].Path })
	seenThread := map[string]bool{}
	seenFile := map[[2]uint64]bool{}
	for _, r := range inv.Roots {
		if seenThread[r.ThreadID] || seenFile[[2]uint64{r.Dev, r.Ino}] {
			return Inventory{}, fmt.Errorf("codex inventory: rollout %s is open twice or shares its thread %s with another open rollout", r.Path, r.ThreadID)
		}
		seenThread[r.ThreadID] = true
		seenFile[[2]uint64{r.Dev, r.Ino}] = true
	}
	switch len(inv.Roots) {
	case 0:
		inv.Status = VerifiedAbsent
	case 1:
		inv.Status = Resolved
	default:
		inv.Status = Unbound
		inv.Reason = ReasonMultipleRoots
	}
	inv.Fingerprint = inventoryFingerprint(inv.Status, filepath.Clean(in.Cwd), inv.Roots)
	return inv, nil
}

func inventoryFingerprint(status InventoryStatus, cwd string, roots []Rollout) string {
	data, _ := json.Marshal(struct {
		Status InventoryStatus `json:"status"`
		Cwd    string          `json:"cwd"`
		Roots  []Rollout       `json:"roots"`
	}{status, cwd, roots}) // plain strings and numbers always marshal
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// verifyOpen checks one open rollout; skip is non-empty for a non-root.
func verifyOpen(f OpenFile, sessions, cwd string) (Rollout, string, error) {
	if strings.HasSuffix(f.Path, " (deleted)") {
		return Rollout{}, "", fmt.Errorf("open rollout %s was deleted", f.Path)
	}
	if !filepath.IsAbs(f.Path) {
		return Rollout{}, "", fmt.Errorf("open rollout path %q is not absolute", f.Path)
	}
	rel, err := filepath.Rel(sessions, f.Path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return Rollout{}, "", fmt.Errorf("open rollout %s is outside %s", f.Path, sessions)
	}
	file, err := native.OpenOwned(f.Path, notInRollouts)
	if err != nil {
		return Rollout{}, "", fmt.Errorf("open rollout %s: %w", f.Path, err)
	}
	defer file.Close()
	dev, ino, err := fileID(file)
	if err != nil {
		return Rollout{}, "", fmt.Errorf("open rollout %s: %w", f.Path, err)
	}
	if dev != f.Dev || ino != f.Ino {
		return Rollout{}, "", fmt.Errorf("rollout %s at its path is not the file the process holds open (device/inode %d/%d, open %d/%d)", f.Path, dev, ino, f.Dev, f.Ino)
	}
	meta, err := readMeta(file, f.Path)
	if err != nil {
		return Rollout{}, "", err
	}
	if id := ThreadIDFromName(filepath.Base(f.Path)); id == "" || id != meta.ID {
		return Rollout{}, "", fmt.Errorf("rollout %s: session_meta id %s does not match the file name", f.Path, meta.ID)
	}
	if meta.Subagent {
		return Rollout{}, "subagent_thread", nil
	}
	if meta.Originator != OriginatorTUI || meta.Source != SourceCLI {
		return Rollout{}, "", fmt.Errorf("rollout %s: originator %q source %q is not a TUI root thread (want %q, %q)", f.Path, meta.Originator, meta.Source, OriginatorTUI, SourceCLI)
	}
	if filepath.Clean(meta.Cwd) != cwd {
		return Rollout{}, "", fmt.Errorf("rollout %s: session_meta cwd %s is not the process cwd %s", f.Path, meta.Cwd, cwd)
	}
	return Rollout{Path: f.Path, Dev: dev, Ino: ino, ThreadID: meta.ID, Meta: meta}, "", nil
}

// fileID returns the device and inode of an open file.
func fileID(f *os.File) (dev, ino uint64, err error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Dev), st.Ino, nil
}
