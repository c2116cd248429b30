package tmux

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sock = "/tmp/tmux-1000/default"

func TestParseLine(t *testing.T) {
	t.Parallel()
	full := Pane{Session: "work", Window: 1, Index: 2, PID: 4242, Command: "node", Path: "/src/app", Socket: sock, ID: "%7", Queried: sock}
	legacy := Pane{Session: "work", Window: 1, Index: 2, PID: 4242, Command: "node", Path: "/src/app", Queried: sock}
	tests := []struct {
		name   string
		line   string
		socket string
		want   Pane
		err    bool
	}{
		{name: "eight tab fields", line: "work\t1\t2\t4242\tnode\t/src/app\t" + sock + "\t%7", socket: sock, want: full},
		{name: "path holding tabs", line: "work\t1\t2\t4242\tnode\t/src/a\tb\tc\t" + sock + "\t%7", socket: sock,
			want: Pane{Session: "work", Window: 1, Index: 2, PID: 4242, Command: "node", Path: "/src/a\tb\tc", Socket: sock, ID: "%7", Queried: sock}},
		{name: "canonical socket differs from the queried one", line: "work\t1\t2\t4242\tnode\t/src/app\t/real/sock\t%7", socket: "/link/sock",
			want: Pane{Session: "work", Window: 1, Index: 2, PID: 4242, Command: "node", Path: "/src/app", Socket: "/real/sock", ID: "%7", Queried: "/link/sock"}},
		{name: "legacy six tab fields", line: "work\t1\t2\t4242\tnode\t/src/app", socket: sock, want: legacy},
		{name: "seven tab fields rejected", line: "work\t1\t2\t4242\tnode\t/src/app\t%7", socket: sock, err: true},
		{name: "five tab fields rejected", line: "work\t1\t2\t4242\tnode", socket: sock, err: true},
		{name: "two tab fields rejected", line: "work\t1", socket: sock, err: true},
		{name: "empty socket and id read as legacy", line: "work\t1\t2\t4242\tnode\t/src/app\t\t", socket: sock, want: legacy},
		{name: "socket without id rejected", line: "work\t1\t2\t4242\tnode\t/src/app\t" + sock + "\t", socket: sock, err: true},
		{name: "pane id not %N", line: "work\t1\t2\t4242\tnode\t/src/app\t" + sock + "\t7", socket: sock, err: true},
		{name: "window not integer", line: "work\tx\t2\t4242\tnode\t/src/app\t" + sock + "\t%7", socket: sock, err: true},
		{name: "negative pane index", line: "work\t1\t-2\t4242\tnode\t/src/app\t" + sock + "\t%7", socket: sock, err: true},
		{name: "pid not integer", line: "work\t1\t2\t42a\tnode\t/src/app\t" + sock + "\t%7", socket: sock, err: true},
		{name: "pid zero", line: "work\t1\t2\t0\tnode\t/src/app\t" + sock + "\t%7", socket: sock, err: true},
		{name: "empty session", line: "\t1\t2\t4242\tnode\t/src/app\t" + sock + "\t%7", socket: sock, err: true},

		// Tabs collapsed to spaces.
		{name: "spaces, eight fields, exact socket", line: "work 1 2 4242 node /src/app " + sock + " %7", socket: sock, want: full},
		{name: "spaces, runs of spaces", line: "work  1   2 4242 node /src/app   " + sock + "  %7  ", socket: sock, want: full},
		{name: "spaces, path with spaces", line: "work 1 2 4242 node /src/my app " + sock + " %7", socket: sock,
			want: Pane{Session: "work", Window: 1, Index: 2, PID: 4242, Command: "node", Path: "/src/my app", Socket: sock, ID: "%7", Queried: sock}},
		{name: "spaces, other socket rejected", line: "work 1 2 4242 node /src/app /tmp/other %7", socket: sock, err: true},
		{name: "spaces, socket is only a suffix of a word", line: "work 1 2 4242 node /src/app/x" + sock + " %7", socket: sock, err: true},
		{name: "spaces, default server cannot be checked", line: "work 1 2 4242 node /src/app " + sock + " %7", socket: "", err: true},
		{name: "spaces, legacy six fields", line: "work 1 2 4242 node /src/app", socket: sock, want: legacy},
		{name: "spaces, legacy, path with spaces", line: "work 1 2 4242 node /src/my app ", socket: sock,
			want: Pane{Session: "work", Window: 1, Index: 2, PID: 4242, Command: "node", Path: "/src/my app", Queried: sock}},
		{name: "spaces, too few fields", line: "work 1 2 4242 node", socket: sock, err: true},

		// Tabs collapsed to underscores.
		{name: "underscores, eight fields, exact socket", line: "work_1_2_4242_node_/src/app_" + sock + "_%7", socket: sock, want: full},
		{name: "underscores, session with underscores", line: "my_work_1_2_4242_node_/src/app_" + sock + "_%7", socket: sock,
			want: Pane{Session: "my_work", Window: 1, Index: 2, PID: 4242, Command: "node", Path: "/src/app", Socket: sock, ID: "%7", Queried: sock}},
		{name: "underscores, other socket rejected", line: "work_1_2_4242_node_/src/app_/tmp/other_%7", socket: sock, err: true},
		{name: "underscores, legacy six fields", line: "work_1_2_4242_node_/src/app", socket: sock, want: legacy},
		{name: "mixed separators rejected", line: "work 1 2 4242 node /src/app_" + sock + " %7", socket: sock, err: true},
		{name: "garbage", line: "no server running on /tmp/tmux-0/default", socket: sock, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseLine(tc.line, tc.socket)
			if tc.err {
				if !errors.Is(err, ErrMalformedLine) {
					t.Fatalf("ParseLine(%q) = %+v, %v; want ErrMalformedLine", tc.line, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLine(%q): %v", tc.line, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseLine(%q) (-want +got):\n%s", tc.line, diff)
			}
		})
	}
}

func TestParseListPanesSkipsRejectedLines(t *testing.T) {
	t.Parallel()
	out := "a\t0\t0\t10\tbash\t/x\t" + sock + "\t%1\n" +
		"\n" +
		"b\t0\t0\t11\tbash\t/p\t%2\n" + // seven fields
		"c\t1\t0\t12\tbash\t/y\t" + sock + "\t%3\r\n"
	got, err := ParseListPanes([]byte(out), sock)
	if !errors.Is(err, ErrMalformedLine) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("err = %v, want ErrMalformedLine naming line 3", err)
	}
	ids := []string{}
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	if diff := cmp.Diff([]string{"%1", "%3"}, ids); diff != "" {
		t.Errorf("pane ids (-want +got):\n%s", diff)
	}
}

func TestPaneTargetAndKey(t *testing.T) {
	t.Parallel()
	p := Pane{Session: "s", Window: 3, Index: 1, PID: 99, Socket: sock, ID: "%4"}
	if got := p.Target(); got != "s:3.1" {
		t.Errorf("Target() = %q", got)
	}
	if got := p.Key(); got != sock+"\t%4" {
		t.Errorf("Key() = %q", got)
	}
	p.Socket, p.ID = "", ""
	if got := p.Key(); got != "s:3.1\t99" {
		t.Errorf("legacy Key() = %q", got)
	}
}

// FuzzParseLine checks that ParseLine never panics, that an accepted
// pane satisfies the documented invariants, and that a pane printed back
// with tabs parses to itself.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"work\t1\t2\t4242\tnode\t/src/app\t" + sock + "\t%7",
		"work\t1\t2\t4242\tnode\t/src/app",
		"work 1 2 4242 node /src/app " + sock + " %7",
		"work_1_2_4242_node_/src/app_" + sock + "_%7",
		"work_1_2_4242_node_/src/app",
		"a\t\t\t\t\t\t\t",
		"%1",
	} {
		f.Add(s, sock)
	}
	f.Fuzz(func(t *testing.T, line, socket string) {
		p, err := ParseLine(line, socket)
		if err != nil {
			if !errors.Is(err, ErrMalformedLine) {
				t.Fatalf("error %v does not wrap ErrMalformedLine", err)
			}
			return
		}
		if p.Session == "" || p.PID <= 0 || p.Window < 0 || p.Index < 0 {
			t.Fatalf("accepted invalid pane %+v from %q", p, line)
		}
		if (p.ID == "") != (p.Socket == "") || (p.ID != "" && !paneIDRE().MatchString(p.ID)) {
			t.Fatalf("accepted pane with bad identity %+v from %q", p, line)
		}
		if p.ID != "" && !strings.Contains(line, "\t") && p.Socket != socket {
			t.Fatalf("collapsed line accepted with socket %q, queried %q", p.Socket, socket)
		}
		if p.ID == "" || strings.ContainsAny(p.Session+p.Command+p.Socket, "\t\r\n") || strings.ContainsAny(p.Path, "\r\n") {
			return
		}
		again, err := ParseLine(strings.Join([]string{p.Session, strconv.Itoa(p.Window), strconv.Itoa(p.Index), strconv.Itoa(p.PID), p.Command, p.Path, p.Socket, p.ID}, "\t"), p.Queried)
		if err != nil {
			t.Fatalf("round trip of %+v: %v", p, err)
		}
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
	})
}
