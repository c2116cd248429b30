package dashboard

import (
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/google/go-cmp/cmp"
)

func TestBuildChart(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	rows := []taskapi.TaskSummary{
		{Status: taskapi.TaskDone, StartedAt: at(58 * time.Minute), LastEventAt: at(57 * time.Minute)},    // first bucket, 1 min
		{Status: taskapi.TaskFailed, StartedAt: at(3 * time.Minute), LastEventAt: at(2 * time.Minute)},    // last bucket
		{Status: taskapi.TaskCancelled, StartedAt: at(4 * time.Minute), LastEventAt: at(1 * time.Minute)}, // last bucket, 3 min
		{Status: taskapi.TaskRunning, StartedAt: at(10 * time.Minute), LastEventAt: at(1 * time.Minute)},  // not finished
		{Status: taskapi.TaskDone, StartedAt: at(3 * time.Hour), LastEventAt: at(2 * time.Hour)},          // too old
	}
	c := buildChart(rows, now)
	var counts []int
	for _, b := range c.Bars {
		counts = append(counts, b.N)
	}
	if diff := cmp.Diff([]int{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, counts); diff != "" {
		t.Errorf("per-bucket counts (-want +got):\n%s", diff)
	}
	if c.Finished != 3 || c.MaxN != 2 || c.MaxDur != "3m00s" || c.Median != "1m00s" || len(c.Dots) != 3 {
		t.Errorf("chart = finished %d, maxN %d, maxDur %q, median %q, %d dots", c.Finished, c.MaxN, c.MaxDur, c.Median, len(c.Dots))
	}
	// The longest task's dot is at the top of the plot, the tallest bar fills it.
	for _, d := range c.Dots {
		if d.Label == "took 3m00s" && d.Y != 8 {
			t.Errorf("longest dot at y=%v, want 8 (the top)", d.Y)
		}
	}
	if b := c.Bars[11]; b.Y != 8 {
		t.Errorf("tallest bar top at %v, want 8", b.Y)
	}
	empty := buildChart(nil, now)
	if empty.Finished != 0 || empty.Median != "" || len(empty.Bars) != chartBuckets {
		t.Errorf("empty chart: %+v", empty)
	}
}

// TestBuildChartEndsAtEndedAt places a finished task by its end time, not
// its last event: a task cancelled 4 minutes after its only event counts
// in the last bucket and took 5 minutes.
func TestBuildChartEndsAtEndedAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	rows := []taskapi.TaskSummary{
		{Status: taskapi.TaskCancelled, StartedAt: at(6 * time.Minute), LastEventAt: at(5 * time.Minute), EndedAt: at(time.Minute)},
	}
	c := buildChart(rows, now)
	if c.Finished != 1 || c.MaxDur != "5m00s" || c.Bars[11].N != 1 {
		t.Errorf("chart = finished %d, maxDur %q, last bucket %d; want 1, 5m00s, 1", c.Finished, c.MaxDur, c.Bars[11].N)
	}
}
