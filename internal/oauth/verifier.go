package oauth

import (
	"context"
	"errors"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// VerifyToken implements server.TokenVerifier: the token's user becomes
// the identity, exactly as a personal token's name does, so tasks are
// isolated per user. Refusals are *server.TokenError; an issuer that cannot
// be reached is any other error.
func (v *Validator) VerifyToken(ctx context.Context, token string) (taskapi.Identity, error) {
	t, err := v.Validate(ctx, token)
	var e *Error
	switch {
	case err == nil:
		return taskapi.Identity{User: t.User}, nil
	case errors.As(err, &e) && e.Kind == ErrInsufficientScope:
		v.logger.Info("oauth: token lacks what this resource requires", "reason", e.Reason)
		return taskapi.Identity{}, &server.TokenError{Code: server.ErrorInsufficientScope, Description: e.Reason}
	case errors.As(err, &e) && e.Kind == ErrInvalidToken:
		v.logger.Info("oauth: token refused", "reason", e.Reason)
		return taskapi.Identity{}, &server.TokenError{Code: server.ErrorInvalidToken, Description: "the access token was refused: " + e.Reason}
	}
	return taskapi.Identity{}, err
}

var _ server.TokenVerifier = (*Validator)(nil)
