package fault

import (
	"errors"
	"testing"
)

func TestFailedErrorMatchesErrActorFailedAndItsCause(t *testing.T) {
	cause := errors.New("boom")
	err := error(&FailedError{Actor: "a/k", Cause: cause})
	if !errors.Is(err, ErrActorFailed) || !errors.Is(err, cause) {
		t.Errorf("%v: want errors.Is to find ErrActorFailed and the cause", err)
	}
}

func TestCycleErrorMatchesErrAskCycle(t *testing.T) {
	err := error(&CycleError{Chain: []string{"a/1", "b/2", "a/1"}})
	if !errors.Is(err, ErrAskCycle) || err.Error() != "troupe: ask cycle: a/1 -> b/2 -> a/1" {
		t.Errorf("%v: want ErrAskCycle and the chain", err)
	}
}

func TestDefinitionErrorMatchesErrInvalidDefinition(t *testing.T) {
	err := error(&DefinitionError{Definition: "d", Field: "f", Problem: "p"})
	if !errors.Is(err, ErrInvalidDefinition) || err.Error() != `troupe: actor definition "d": f: p` {
		t.Errorf("%v: want ErrInvalidDefinition and definition, field and problem", err)
	}
}
