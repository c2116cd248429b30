package claudecode

import (
	"context"
	"errors"

	"github.com/clawconnect/clawconnect/executor"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func tryNext(s interface {
	Next(context.Context) (executor.Event, error)
}) (executor.Event, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ev, err := s.Next(ctx)
	return ev, err == nil
}
