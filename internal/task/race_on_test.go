//go:build race

package task

// raceEnabled reports whether the race detector is on; the load-sized tests scale
// down under it.
const raceEnabled = true
