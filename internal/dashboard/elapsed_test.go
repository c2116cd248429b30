package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
)

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestElapsedOfAFinishedTaskIsItsRunTime cancels a task 90 s after it
// started, with no event since its start: the Tasks table and the task
// page show 1m30s (start to end), not 0.0s (start to last event), and the
// same again once the clock has moved on.
func TestElapsedOfAFinishedTaskIsItsRunTime(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	fake := servertest.New()
	fake.Clock = clock.Now
	reg, err := config.ParseRegistry([]byte(`{"default":"alpha","agents":[{"id":"alpha","url":"ws://127.0.0.1:1","password":"p"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Tasks: fake, Registry: reg, Auth: nil})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(dashboard.Options{Server: srv, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetPages(d)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	b := (&rig{ts: ts}).browser(t)

	res, err := fake.Run(context.Background(), server.RunRequest{Agent: "alpha", Task: "HOLD"})
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(90 * time.Second)
	if _, err := fake.Cancel(context.Background(), res.JobID); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour)

	cells := map[string]*regexp.Regexp{
		"/":                   regexp.MustCompile(`<td data-label="Elapsed">([^<]*)</td>`),
		"/tasks/" + res.JobID: regexp.MustCompile(`<dd id="task-elapsed">([^<]*)</dd>`),
	}
	for path, re := range cells {
		code, _, body := b.get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		m := re.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("GET %s: no Elapsed cell\n%s", path, body)
		}
		if m[1] != "1m30s" {
			t.Errorf("GET %s: Elapsed = %q, want 1m30s (start to cancel)", path, m[1])
		}
	}
}
