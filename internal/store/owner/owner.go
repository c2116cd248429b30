// Package owner names the running process for the leases it holds in the
// store, and proves another registered process dead: on the same host and
// pid namespace, a pid that is gone, or that now belongs to a process that
// started at another time (or in another boot), is not the registered
// process any more, so its leases can be taken over at once.
package owner

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/proc"
)

// Identity is what the store records about a process (store.Process
// without role and times).
type Identity struct {
	// ID is the lease owner id: host name, pid and a random suffix.
	ID string `json:"id"`
	// Host is the host name and pid namespace; "" where it cannot be read.
	Host string `json:"host"`
	PID  int64  `json:"pid"`
	// Start is the boot id and the process's start time in clock ticks;
	// "" where it cannot be read (then nothing can be proven about it).
	Start string `json:"start"`
}

// Encode returns the identity as one string, for a record that names its
// owner without a process registry row (a thread transition): Decode of
// it gives back what Dead needs.
func (id Identity) Encode() string {
	b, _ := json.Marshal(id)
	return string(b)
}

// Decode parses what Encode returns. Anything else, such as an owner
// written before records carried the whole identity, is an error.
func Decode(s string) (Identity, error) {
	var id Identity
	if !strings.HasPrefix(s, "{") {
		return id, fmt.Errorf("decode owner %.40q: not an encoded identity", s)
	}
	if err := json.Unmarshal([]byte(s), &id); err != nil {
		return id, fmt.Errorf("decode owner: %w", err)
	}
	if id.ID == "" || id.PID <= 0 {
		return Identity{}, fmt.Errorf("decode owner %.40q: want an id and a positive pid", s)
	}
	return id, nil
}

// String names the process for a reader: "pid N on HOST".
func (id Identity) String() string {
	host, _, _ := strings.Cut(id.Host, "/")
	if host == "" {
		host, _, _ = strings.Cut(id.ID, "/")
	}
	return fmt.Sprintf("pid %d on %s", id.PID, host)
}

// Self returns this process's identity, with a fresh random ID suffix
// (each call names a new owner).
func Self() Identity {
	host, _ := os.Hostname()
	pid := os.Getpid()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := Identity{ID: fmt.Sprintf("%s/%d/%s", host, pid, hex.EncodeToString(b)), PID: int64(pid)}
	if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		id.Host = host + "/" + ns
	}
	id.Start, _ = startOf(int64(pid))
	return id
}

// Process returns the registry row of id for role at now (Unix ms).
func (id Identity) Process(role string, now int64) store.Process {
	return store.Process{ID: id.ID, Host: id.Host, PID: id.PID, Start: id.Start, Role: role, StartedAt: now, HeartbeatAt: now}
}

// Dead reports whether p is provably not running, as seen from self: it ran
// on the same host and pid namespace, and its pid is gone or belongs to a
// process with another start identity. Anything unprovable (another host,
// no /proc) reports false, so the caller waits for p's leases to expire.
func (id Identity) Dead(p store.Process) bool {
	if id.Host == "" || p.Host != id.Host || p.Start == "" || p.PID <= 0 {
		return false
	}
	start, err := startOf(p.PID)
	if errors.Is(err, proc.ErrNoProcess) {
		return true
	}
	return err == nil && start != p.Start
}

// startOf returns "<boot id>:<start ticks>" of pid; a pid that is gone,
// or a zombie (which holds no leases), is proc.ErrNoProcess.
func startOf(pid int64) (string, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	p, err := proc.FS{}.ReadStat(int(pid))
	if err != nil {
		return "", err
	}
	if p.State == 'Z' || p.State == 'X' {
		return "", proc.ErrNoProcess
	}
	return strings.TrimSpace(string(boot)) + ":" + strconv.FormatUint(p.StartTicks, 10), nil
}
