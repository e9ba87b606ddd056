package actor_test

import (
	"errors"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/fault"
)

// A FailedError or CycleError a handler passes on (the error of its own
// ask) reads, to the runtime's routing, as the runtime's own, so it
// crosses nodes with its fields.
func TestPassedOnErrorsReadAsTheRuntimes(t *testing.T) {
	cause := errors.New("boom")
	var fe *fault.FailedError
	if err := error(&actor.FailedError{Actor: "a/k", Cause: cause}); !errors.As(err, &fe) || fe.Actor != "a/k" || fe.Cause != cause {
		t.Errorf("errors.As(FailedError, *fault.FailedError) = %#v, want actor a/k and its cause", fe)
	}
	var ce *fault.CycleError
	chain := []string{"a/1", "b/2", "a/1"}
	if err := error(&actor.CycleError{Chain: chain}); !errors.As(err, &ce) || len(ce.Chain) != 3 {
		t.Errorf("errors.As(CycleError, *fault.CycleError) = %#v, want the chain", ce)
	}
	if !errors.Is(&actor.FailedError{Cause: cause}, actor.ErrActorFailed) || actor.ErrUnavailable != fault.ErrUnavailable {
		t.Error("actor's sentinels must be the runtime's values")
	}
}
