package actor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

var errOverdrawn = errors.New("acct: overdrawn")

type limitError struct{ Limit int }

func (e *limitError) Error() string { return fmt.Sprintf("acct: over the limit of %d", e.Limit) }

type AcctMsg interface{ acctMsg() }

// Withdraw answers with Err's error: "sentinel", "typed", "wrapped",
// "undeclared", "deferred" (Fail with the sentinel), or none.
type Withdraw struct {
	actor.Reply[AcctMsg, int]
	Err string
}

type Deposited struct{ actor.Reply[AcctMsg, int] }

type Member struct{ actor.Reply[AcctMsg, string] }

func (Withdraw) acctMsg()  {}
func (Deposited) acctMsg() {}
func (Member) acctMsg()    {}

var acct = actor.Define("acct", func(c *actor.Context[int, AcctMsg], m AcctMsg) error {
	switch m := m.(type) {
	case Withdraw:
		c.SetState(c.State() + 1) // committed before the answer: a refusal keeps it
		switch m.Err {
		case "sentinel":
			return errOverdrawn
		case "typed":
			return &limitError{Limit: 100}
		case "wrapped":
			return fmt.Errorf("withdraw 5: %w", errOverdrawn)
		case "undeclared":
			return errors.New("ledger unreadable")
		case "deferred":
			d := actor.Defer(c, m)
			go d.Fail(errOverdrawn)
			return nil
		case "deferred-undeclared":
			d := actor.Defer(c, m)
			go d.Fail(errors.New("ledger unreadable"))
			return nil
		case "tell":
			return errOverdrawn // told, not asked: nobody to answer
		}
		return actor.Respond(c, m, c.State())
	case Deposited:
		return actor.Respond(c, m, c.State())
	case Member:
		return actor.Respond(c, m, c.Member())
	}
	return nil
}, actor.WithErrors(errOverdrawn, (*limitError)(nil)), actor.WithBackoff(time.Hour, time.Hour))

func TestDeclaredErrorsAnswerAsksWithoutARestart(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, acct)
	ref := acct.Ref(sys, "k")
	ctx := systemtest.Ctx(t)
	for i := range 7 {
		if _, err := actor.Ask(ctx, ref, Withdraw{Err: "sentinel"}); err != errOverdrawn {
			t.Fatalf("refusal %d: got %v, want errOverdrawn itself", i, err)
		}
	}
	if err := ref.Tell(ctx, Withdraw{Err: "tell"}); err != nil {
		t.Fatal(err)
	}
	// With a backoff of an hour, any restart would hold this ask past
	// its deadline.
	n, err := actor.Ask(ctx, ref, Deposited{})
	if err != nil || n != 8 {
		t.Fatalf("got %d, %v: want 8, every refusal's state kept", n, err)
	}
	if r := sys.Stats().Restarts; r != 0 {
		t.Errorf("%d restarts, want none", r)
	}
}

func TestDeclaredErrorsMatchByValueTypeAndWrapping(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, acct)
	ref := acct.Ref(sys, "k")
	ctx := systemtest.Ctx(t)
	_, err := actor.Ask(ctx, ref, Withdraw{Err: "typed"})
	var le *limitError
	if !errors.As(err, &le) || le.Limit != 100 || errors.Is(err, actor.ErrActorFailed) {
		t.Errorf("typed: got %v, want *limitError{100}, no failure", err)
	}
	_, err = actor.Ask(ctx, ref, Withdraw{Err: "wrapped"})
	if !errors.Is(err, errOverdrawn) || err.Error() != "withdraw 5: acct: overdrawn" {
		t.Errorf("wrapped: got %v, want the wrapper around errOverdrawn", err)
	}
	_, err = actor.Ask(ctx, ref, Withdraw{Err: "deferred"})
	if err != errOverdrawn {
		t.Errorf("deferred: got %v, want errOverdrawn from Deferred.Fail", err)
	}
	if r := sys.Stats().Restarts; r != 0 {
		t.Errorf("%d restarts, want none", r)
	}
}

func TestUndeclaredErrorsStillFailAndRestart(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, acct)
	_, err := actor.Ask(systemtest.Ctx(t), acct.Ref(sys, "k"), Withdraw{Err: "undeclared"})
	var fe *actor.FailedError
	if !errors.As(err, &fe) || fe.Actor != "acct/k" || fe.Member != "" || fe.Panic || fe.Cause.Error() != "ledger unreadable" {
		t.Fatalf("got %v, want a FailedError of acct/k with the cause, no member in a standalone system", err)
	}
	if r := sys.Stats().Restarts; r != 1 {
		t.Errorf("%d restarts when the failure was answered, want 1", r)
	}
}

// Deferred.Fail answers after the handler returned: with a declared
// error as itself, with any other as a failure that is no panic; the
// actor restarts for neither (the handler did not fail).
func TestDeferredFailAnswersWithoutARestart(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, acct)
	ref := acct.Ref(sys, "k")
	ctx := systemtest.Ctx(t)
	if _, err := actor.Ask(ctx, ref, Withdraw{Err: "deferred"}); err != errOverdrawn {
		t.Fatalf("declared: got %v, want errOverdrawn itself", err)
	}
	_, err := actor.Ask(ctx, ref, Withdraw{Err: "deferred-undeclared"})
	var fe *actor.FailedError
	if !errors.As(err, &fe) || fe.Actor != "acct/k" || fe.Panic || fe.Cause.Error() != "ledger unreadable" {
		t.Fatalf("undeclared: got %v, want acct/k's failure with the cause, no panic", err)
	}
	if n, err := actor.Ask(ctx, ref, Deposited{}); err != nil || n != 2 {
		t.Errorf("state %d, %v: want 2, kept through both answers", n, err)
	}
	if r := sys.Stats().Restarts; r != 0 {
		t.Errorf("%d restarts, want none", r)
	}
}

func TestPanicsFailWithThePanicFlag(t *testing.T) {
	panicky := actor.Define("panicky", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error { panic("torn") })
	sys := systemtest.NewSystem(t, system.Config{}, panicky)
	_, err := actor.Ask(systemtest.Ctx(t), panicky.Ref(sys, "k"), Do{Op: "x"})
	var fe *actor.FailedError
	var pe *actor.PanicError
	if !errors.As(err, &fe) || !fe.Panic || !errors.As(err, &pe) || pe.Value != "torn" {
		t.Fatalf("got %v, want a FailedError with Panic and a *PanicError", err)
	}
}

func TestContextMemberIsEmptyInAStandaloneSystem(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, acct)
	if got, err := actor.Ask(systemtest.Ctx(t), acct.Ref(sys, "k"), Member{}); err != nil || got != "" {
		t.Errorf("got %q, %v: want \"\"", got, err)
	}
}

func TestWithErrorsValidates(t *testing.T) {
	h := func(c *actor.Context[int, int], m int) error { return nil }
	for _, c := range []struct {
		name string
		errs []error
	}{
		{"nil", []error{nil}},
		{"duplicate sentinel", []error{errOverdrawn, errOverdrawn}},
		{"two sentinels with one text", []error{errOverdrawn, errors.New(errOverdrawn.Error())}},
		{"unencodable type", []error{(*unencodableError)(nil)}},
		{"PanicError", []error{(*actor.PanicError)(nil)}},
		{"FailedError", []error{(*actor.FailedError)(nil)}},
		{"CycleError", []error{(*actor.CycleError)(nil)}},
		{"DefinitionError", []error{(*actor.DefinitionError)(nil)}},
		{"ErrUnavailable", []error{actor.ErrUnavailable}},
		{"ErrActorFailed", []error{actor.ErrActorFailed}},
		{"wrapped ErrMailboxFull", []error{fmt.Errorf("busy: %w", actor.ErrMailboxFull)}},
	} {
		err := actor.Define("d", h, actor.WithErrors(c.errs...)).Err()
		var de *actor.DefinitionError
		if !errors.As(err, &de) || de.Field != "WithErrors" || de.Definition != "d" {
			t.Errorf("%s: got %v, want a DefinitionError naming WithErrors", c.name, err)
		}
	}
	if err := actor.Define("d", h, actor.WithErrors(errOverdrawn, (*limitError)(nil))).Err(); err != nil {
		t.Errorf("valid declarations: %v", err)
	}
}

type unencodableError struct{ F func() }

func (*unencodableError) Error() string { return "unencodable" }

func TestWithIdleTimeoutAcceptsNever(t *testing.T) {
	h := func(c *actor.Context[int, int], m int) error { return nil }
	if err := actor.Define("d", h, actor.WithIdleTimeout(actor.Never)).Err(); err != nil {
		t.Errorf("Never: %v", err)
	}
	for _, d := range []time.Duration{0, -2 * time.Second} {
		if err := actor.Define("d", h, actor.WithIdleTimeout(d)).Err(); !errors.Is(err, actor.ErrInvalidDefinition) {
			t.Errorf("%v: got %v, want ErrInvalidDefinition", d, err)
		}
	}
}

func TestTemporarySaysWhetherARetryCanHelp(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{actor.ErrUnavailable, true},
		{fmt.Errorf("send: %w", actor.ErrUnavailable), true},
		{actor.ErrMailboxFull, true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{actor.ErrMessageTooLarge, false},
		{actor.ErrUnknownActor, false},
		{actor.ErrUndecodable, false},
		{actor.ErrInvalidRef, false},
		{actor.ErrNilRef, false},
		{actor.ErrSystemClosed, false},
		{actor.ErrAskCycle, false},
		{actor.ErrNoReply, false},
		{actor.ErrWrongReply, false},
		{actor.ErrInvalidDefinition, false},
		{&actor.FailedError{Cause: actor.ErrUnavailable}, false},
		{errOverdrawn, false},
	} {
		if got := actor.Temporary(c.err); got != c.want {
			t.Errorf("Temporary(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
