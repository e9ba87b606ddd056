package actor_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// stalling defines an actor that, for ops named "stall", reports that it
// started and then waits for its context to end, reporting what it saw.
func stalling(name string, started chan<- string, ended chan<- error, opts ...actor.Option) *actor.Def[int, ProbeMsg] {
	return actor.Define(name, func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		op := opOf(m)
		if op == "stall" {
			if _, ok := c.Deadline(); !ok {
				ended <- errors.New("the handler's context has no deadline")
				return nil
			}
			started <- op
			<-c.Done()
			ended <- c.Err()
			return nil
		}
		if d, ok := m.(Do); ok {
			return actor.Respond(c, d, op)
		}
		return nil
	}, opts...)
}

func TestAskWithoutDeadlineUsesTheDefinitionsAskTimeout(t *testing.T) {
	// In a bubble, the deadline cannot pass before the handler starts.
	synctest.Test(t, func(t *testing.T) {
		started, ended := make(chan string, 1), make(chan error, 1)
		def := stalling("stall", started, ended, actor.WithAskTimeout(20*time.Millisecond))
		sys := newSystem(t, system.Config{}, def)
		_, err := actor.Ask(context.Background(), def.Ref(sys, "k"), Do{Op: "stall"})
		mustIs(t, err, context.DeadlineExceeded)
		recv(t, started, "the handler to start")
		if herr := recv(t, ended, "the handler's context to end"); !errors.Is(herr, context.Canceled) {
			t.Errorf("handler's c.Err() after the ask timed out = %v, want context.Canceled", herr)
		}
	})
}

func TestAskWithoutDeadlineUsesTheSystemsAskTimeout(t *testing.T) {
	// In a bubble, the deadline cannot pass before the handler starts.
	synctest.Test(t, func(t *testing.T) {
		started, ended := make(chan string, 1), make(chan error, 1)
		def := stalling("stall", started, ended)
		sys := newSystem(t, system.Config{AskTimeout: 20 * time.Millisecond}, def)
		_, err := actor.Ask(context.Background(), def.Ref(sys, "k"), Do{Op: "stall"})
		mustIs(t, err, context.DeadlineExceeded)
		recv(t, ended, "the handler's context to end")
	})
}

func TestAskDeadlineCancelsTheRunningHandler(t *testing.T) {
	// In a bubble, the deadline cannot pass before the handler starts.
	synctest.Test(t, func(t *testing.T) {
		started, ended := make(chan string, 1), make(chan error, 1)
		def := stalling("stall", started, ended)
		sys := newSystem(t, system.Config{}, def)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{Op: "stall"})
		mustIs(t, err, context.DeadlineExceeded)
		if !strings.Contains(err.Error(), "stall/k") {
			t.Errorf("ask error %q does not name the actor", err)
		}
		recv(t, ended, "the handler to observe <-c.Done()")
		// The actor is still usable.
		if got, err := actor.Ask(ctxT(t), def.Ref(sys, "k"), Do{Op: "after"}); err != nil || got != "after" {
			t.Errorf("Ask after a cancelled one = %q, %v", got, err)
		}
	})
}

func TestCancelledAskCancelsTheRunningHandler(t *testing.T) {
	started, ended := make(chan string, 1), make(chan error, 1)
	def := stalling("stall", started, ended)
	sys := newSystem(t, system.Config{}, def)
	ctx, cancel := context.WithCancel(ctxT(t))
	res := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{Op: "stall"})
		res <- err
	}()
	recv(t, started, "the handler to start")
	cancel()
	err := recv(t, res, "Ask to return after cancel")
	mustIs(t, err, context.Canceled)
	if herr := recv(t, ended, "the handler to observe <-c.Done()"); !errors.Is(herr, context.Canceled) {
		t.Errorf("handler's c.Err() = %v, want context.Canceled", herr)
	}
}

func TestCancelledAskDropsItsQueuedMessage(t *testing.T) {
	g, l, evs := newGate(), &opLog{}, newEvents()
	def := gatedProbe("probe", g, l)
	sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
	ref := def.Ref(sys, "k")
	if err := ref.Tell(ctxT(t), Note{Op: "block"}); err != nil {
		t.Fatal(err)
	}
	recv(t, g.entered, "the handler to block")

	ctx, cancel := context.WithCancel(ctxT(t))
	res := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, ref, Do{Op: "abandoned"})
		res <- err
	}()
	waitUntil(t, "the ask is queued", func() bool { return sys.Stats().Queued == 1 })
	cancel()
	mustIs(t, recv(t, res, "the cancelled Ask to return"), context.Canceled)

	tctx, tcancel := context.WithTimeout(ctxT(t), 10*time.Millisecond)
	defer tcancel()
	_, err := actor.Ask(tctx, ref, Do{Op: "timed out"})
	mustIs(t, err, context.DeadlineExceeded)

	close(g.open)
	if got, err := actor.Ask(ctxT(t), ref, Do{Op: "after"}); err != nil || got != "after" {
		t.Fatalf("Ask = %q, %v", got, err)
	}
	if want := []string{"block", "after"}; !slices.Equal(l.get(), want) {
		t.Errorf("handler saw %v, want %v: abandoned asks must be dropped", l.get(), want)
	}
	if n := evs.Count(is(system.MessageDropped, "k")); n != 2 {
		t.Errorf("MessageDropped events = %d, want 2", n)
	}
}

var errBroken = errors.New("broken on purpose")

// failing defines an actor that fails ops named "error" and "panic".
func failing(name string, opts ...actor.Option) *actor.Def[int, ProbeMsg] {
	return actor.Define(name, func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		switch op := opOf(m); op {
		case "error":
			return errBroken
		case "panic":
			panic("boom")
		case "silent":
			return nil
		default:
			if d, ok := m.(Do); ok {
				return actor.Respond(c, d, op)
			}
		}
		return nil
	}, opts...)
}

func TestHandlerErrorReachesTheAskerAsErrActorFailed(t *testing.T) {
	def := failing("fails")
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	_, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{Op: "error"})
	mustIs(t, err, actor.ErrActorFailed)
	mustIs(t, err, errBroken)
	var fe *actor.FailedError
	if !errors.As(err, &fe) || fe.Actor != "fails/k" || fe.Cause != errBroken {
		t.Fatalf("errors.As FailedError: %#v, want Actor fails/k and the handler's error", fe)
	}
	if got, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{Op: "ok"}); err != nil || got != "ok" {
		t.Errorf("Ask after the failure = %q, %v; the actor must restart", got, err)
	}
}

func TestHandlerPanicReachesTheAskerAndDoesNotCrash(t *testing.T) {
	def := failing("panics")
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	_, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{Op: "panic"})
	mustIs(t, err, actor.ErrActorFailed)
	var pe *actor.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("errors.As PanicError: %#v, want the panic value and a stack", pe)
	}
	// A told message that panics has no asker; it must not crash either.
	if err := def.Ref(sys, "k").Tell(ctx, Note{Op: "panic"}); err != nil {
		t.Fatal(err)
	}
	if got, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{Op: "ok"}); err != nil || got != "ok" {
		t.Errorf("Ask after panics = %q, %v", got, err)
	}
}

func TestAskWithoutResponseFailsWithErrNoReply(t *testing.T) {
	def := failing("silent")
	sys := newSystem(t, system.Config{}, def)
	_, err := actor.Ask(ctxT(t), def.Ref(sys, "k"), Do{Op: "silent"})
	mustIs(t, err, actor.ErrNoReply)
}

// Answer resolves the pending deferred reply, or fails it.
type Answer struct {
	Value string
	Fail  bool
}

func (Answer) probeMsg() {}

func TestDeferredReplyIsResolvedByALaterMessage(t *testing.T) {
	var pending []actor.Deferred[string]
	resolved, deferred := make(chan bool, 4), make(chan string, 4)
	def := actor.Define("deferring", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		switch m := m.(type) {
		case Do:
			pending = append(pending, actor.Defer(c, m))
			deferred <- m.Op
		case Answer:
			d := pending[0]
			pending = pending[1:]
			if m.Fail {
				resolved <- d.Fail(errBroken)
			} else {
				resolved <- d.Resolve(m.Value)
			}
		}
		return nil
	})
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")

	res := make(chan string, 1)
	go func() {
		v, err := actor.Ask(ctx, ref, Do{Op: "later"})
		if err != nil {
			v = err.Error()
		}
		res <- v
	}()
	recv(t, deferred, "the handler to defer its reply")
	if err := ref.Tell(ctx, Answer{Value: "resolved"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, res, "the deferred reply"); got != "resolved" {
		t.Errorf("deferred Ask = %q, want resolved", got)
	}
	if !recv(t, resolved, "Resolve") {
		t.Error("Resolve reported that nobody waited")
	}

	errc := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, ref, Do{Op: "will fail"})
		errc <- err
	}()
	recv(t, deferred, "the handler to defer the second reply")
	if err := ref.Tell(ctx, Answer{Fail: true}); err != nil {
		t.Fatal(err)
	}
	err := recv(t, errc, "the failed deferred reply")
	mustIs(t, err, actor.ErrActorFailed)
	mustIs(t, err, errBroken)
	if !recv(t, resolved, "Fail") {
		t.Error("Fail reported that nobody waited")
	}

	// Resolving after the asker gave up reports false.
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := actor.Ask(cctx, ref, Do{Op: "abandoned"})
		errc <- err
	}()
	recv(t, deferred, "the handler to defer the third reply")
	cancel()
	mustIs(t, recv(t, errc, "the cancelled ask"), context.Canceled)
	if err := ref.Tell(ctx, Answer{Value: "too late"}); err != nil {
		t.Fatal(err)
	}
	if recv(t, resolved, "the late Resolve") {
		t.Error("Resolve after the asker gave up reported true")
	}
}

func TestRespondAfterTellIsANoOpAndASecondRespondIsIgnored(t *testing.T) {
	errs := make(chan error, 2)
	def := actor.Define("twice", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		if d, ok := m.(Do); ok {
			errs <- actor.Respond(c, d, "first")
			return actor.Respond(c, d, "second")
		}
		errs <- actor.Respond(c, Do{}, "to nobody")
		return nil
	})
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	if err := def.Ref(sys, "k").Tell(ctx, Note{}); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, errs, "Respond after Tell"); err != nil {
		t.Errorf("Respond after a Tell = %v, want nil", err)
	}
	if got, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{Op: "x"}); err != nil || got != "first" {
		t.Errorf("Ask = %q, %v; want the first response", got, err)
	}
}

// Other is a request of ProbeMsg actors with a different reply type.
type Other struct{ actor.Reply[ProbeMsg, int] }

func (Other) probeMsg() {}

func TestRespondToAnotherRequestTypeFailsWithErrWrongReply(t *testing.T) {
	def := actor.Define("wrong", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		if _, ok := m.(Do); ok {
			return actor.Respond(c, Other{}, 7) // compiles, but answers the wrong request
		}
		return nil
	})
	sys := newSystem(t, system.Config{}, def)
	_, err := actor.Ask(ctxT(t), def.Ref(sys, "k"), Do{})
	mustIs(t, err, actor.ErrActorFailed)
	mustIs(t, err, actor.ErrWrongReply)
}
