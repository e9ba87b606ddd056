package runtime

import (
	"context"
	"errors"

	"github.com/troupe-go/troupe/internal/host"
)

// tellOutcome classifies what Tell returned, for the metrics.
func tellOutcome(err error) host.Outcome {
	switch {
	case err == nil:
		return host.OutcomeOK
	case errors.Is(err, ErrMailboxFull):
		return host.OutcomeRefused
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return host.OutcomeTimeout
	}
	return host.OutcomeUndelivered
}

// askResult classifies what an ask to the type behind to returned, for
// the metrics: a handler's failure or declared error is "failed", whatever
// it wraps.
func askResult(err error, to interface{ declares(error) bool }) host.Outcome {
	switch {
	case err == nil:
		return host.OutcomeOK
	case errors.Is(err, ErrActorFailed), to.declares(err):
		return host.OutcomeFailed
	}
	return tellOutcome(err)
}
