package codec

import (
	"errors"
	"fmt"
	"testing"

	"github.com/troupe-go/troupe/internal/fault"
)

var errDeclared = errors.New("test: declared")

type declaredType struct{ N int }

func (e *declaredType) Error() string { return fmt.Sprintf("test: n=%d", e.N) }

func TestDeclaredErrorsRoundTrip(t *testing.T) {
	var es Errors
	if probs := es.Register("d", []error{errDeclared, (*declaredType)(nil)}); len(probs) > 0 {
		t.Fatal(probs)
	}
	for _, c := range []struct {
		err   error
		check func(error) bool
	}{
		{errDeclared, func(e error) bool { return e == errDeclared }},
		{fmt.Errorf("ctx: %w", errDeclared), func(e error) bool { return errors.Is(e, errDeclared) && e.Error() == "ctx: test: declared" }},
		{&declaredType{N: 4}, func(e error) bool {
			var d *declaredType
			return errors.As(e, &d) && d.N == 4 && e.Error() == "test: n=4"
		}},
		{fmt.Errorf("ctx: %w", &declaredType{N: 5}), func(e error) bool {
			var d *declaredType
			return errors.As(e, &d) && d.N == 5 && e.Error() == "ctx: test: n=5"
		}},
	} {
		de, ok := es.Encode(c.err)
		if !ok {
			t.Fatalf("%v: not found declared", c.err)
		}
		if back := es.Decode(nil, de); !c.check(back) {
			t.Errorf("%v came back as %v (%T)", c.err, back, back)
		}
	}
	if es.Declares(errors.New("other")) || es.Declares(nil) {
		t.Error("an undeclared error counts as declared")
	}
	var none *Errors
	if none.Declares(errDeclared) {
		t.Error("a definition without declared errors declares one")
	}
}

func TestUnknownDeclaredErrorsAreUndecodable(t *testing.T) {
	var es Errors
	de, _ := (&Errors{}).Encode(errDeclared) // not declared there
	if de != nil {
		t.Fatal("encoded an undeclared error")
	}
	var other Errors
	other.Register("d", []error{errDeclared})
	de, _ = other.Encode(errDeclared)
	if err := es.Decode(nil, de); !errors.Is(err, ErrUndecodable) {
		t.Errorf("got %v, want ErrUndecodable for a name the receiver does not declare", err)
	}
}

func TestRegisterRejectsTheRuntimesOwnErrors(t *testing.T) {
	for _, err := range []error{
		fault.ErrUnavailable, fault.ErrActorFailed, fault.ErrMessageTooLarge,
		fmt.Errorf("busy: %w", fault.ErrMailboxFull),
		(*fault.PanicError)(nil), (*fault.FailedError)(nil), (*fault.CycleError)(nil), (*fault.DefinitionError)(nil),
	} {
		var es Errors
		probs := es.Register("d", []error{err})
		if len(probs) != 1 || probs[0].Field != "WithErrors" {
			t.Errorf("%#v: got %v, want one problem naming WithErrors", err, probs)
		}
		if es.Declares(err) {
			t.Errorf("%#v: declared after it was rejected", err)
		}
	}
}

// A failure is never declared, whatever it wraps: its cause was another
// actor's, and a failure from another node carries it the same way.
func TestDeclaresDoesNotLookInsideAFailure(t *testing.T) {
	var es Errors
	es.Register("d", []error{errDeclared, (*declaredType)(nil)})
	for _, cause := range []error{errDeclared, &declaredType{N: 1}} {
		fe := &fault.FailedError{Actor: "b/1", Cause: cause}
		if es.Declares(fe) || es.Declares(fmt.Errorf("ask b: %w", fe)) {
			t.Errorf("a failure caused by %v counts as declared", cause)
		}
	}
}
