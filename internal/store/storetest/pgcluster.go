package storetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Cluster is a throwaway PostgreSQL cluster of one test, for fault tests
// that stop and restart the database: never the shared one other tests
// use. Its data lives under t.TempDir(); it is stopped at cleanup.
type Cluster struct {
	bin, data string
	port      int
	asPG      bool // run the server as the postgres user (we are root)
}

// StartPostgres initializes and starts a cluster on a free loopback port.
// It skips the test unless TEST_DATABASE_URL is set (PostgreSQL is part of
// this environment) and the server binaries are installed.
func StartPostgres(t *testing.T) *Cluster {
	t.Helper()
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("TEST_DATABASE_URL is not set; the PostgreSQL fault tests need the server installed (scripts/setup/postgres.sh)")
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(bins)
	if len(bins) == 0 {
		t.Skip("no PostgreSQL server binaries under /usr/lib/postgresql")
	}
	c := &Cluster{bin: bins[len(bins)-1], data: filepath.Join(t.TempDir(), "pg"), asPG: os.Geteuid() == 0}
	if c.asPG {
		// initdb refuses to run as root: the data directory belongs to the
		// postgres user, who must be able to reach it.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root without a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for d := filepath.Dir(c.data); d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
			_ = os.Chmod(d, 0o755)
		}
		if err := os.Mkdir(c.data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(c.data, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	c.run(t, "initdb", "-D", c.data, "-A", "trust", "-U", "postgres")
	c.Start(t)
	t.Cleanup(func() { _ = c.pgctl("stop", "-m", "immediate") })
	return c
}

// URL is the cluster's connection URL (database postgres).
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Start starts the (stopped) cluster and waits until it accepts connections.
func (c *Cluster) Start(t *testing.T) {
	t.Helper()
	if err := c.pgctl("start", "-w", "-l", filepath.Join(c.data, "server.log"),
		"-o", fmt.Sprintf("-h 127.0.0.1 -p %d -k %s", c.port, c.data)); err != nil {
		t.Fatal(err)
	}
}

// Stop stops the cluster at once (fast shutdown: connections are cut).
func (c *Cluster) Stop(t *testing.T) {
	t.Helper()
	if err := c.pgctl("stop", "-w", "-m", "fast"); err != nil {
		t.Fatal(err)
	}
}

func (c *Cluster) pgctl(args ...string) error {
	return c.exec("pg_ctl", append([]string{"-D", c.data}, args...)...)
}

func (c *Cluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if err := c.exec(name, args...); err != nil {
		t.Fatal(err)
	}
}

func (c *Cluster) exec(name string, args ...string) error {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.asPG {
		q := make([]string, 0, len(args)+1)
		for _, a := range append([]string{path}, args...) {
			q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
		}
		cmd = exec.Command("su", "postgres", "-s", "/bin/sh", "-c", strings.Join(q, " "))
	} else {
		cmd = exec.Command(path, args...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", name, err, out)
	}
	return nil
}
