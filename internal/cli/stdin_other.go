//go:build !linux

package cli

import "io"

// pollableStdin returns stdin as it is where a pipe cannot be opened a
// second time through /proc.
func pollableStdin(in io.Reader) (io.Reader, func()) { return in, func() {} }
