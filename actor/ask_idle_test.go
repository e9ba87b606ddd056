package actor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// Asks to an actor that is active and idle: the case where running the
// handler on the asking goroutine would be tempting, and is not done
// (Ask's deadline could not end such a run).

// askOnStack reports whether the calling handler runs under actor.Ask,
// that is on the asking goroutine.
func askOnStack() bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "github.com/troupe-go/troupe/actor.Ask[") {
			return true
		}
		if !more {
			return false
		}
	}
}

var errInline = errors.New("the handler ran on the asking goroutine")

// idleProbe answers "where" with "inline" or "queued"; "block" waits at
// g; "stall" waits for its context and reports c.Err() on ended; "sleep"
// sleeps 30 ms without looking at its context; "panic" panics; "defer"
// defers its reply until an Answer; "log" answers the ops seen so far.
func idleProbe(name string, g *gate, ended chan<- error, opts ...actor.Option) *actor.Def[[]string, ProbeMsg] {
	var pending actor.Deferred[string]
	return actor.Define(name, func(c *actor.Context[[]string, ProbeMsg], m ProbeMsg) error {
		op := opOf(m)
		c.SetState(append(c.State()[:len(c.State()):len(c.State())], op))
		d, ok := m.(Do)
		switch op {
		case "where":
			if askOnStack() {
				return actor.Respond(c, d, "inline")
			}
			return actor.Respond(c, d, "queued")
		case "block":
			g.pass(op)
		case "stall":
			if askOnStack() {
				ended <- errInline
				return nil
			}
			if g != nil {
				g.entered <- op
			}
			<-c.Done()
			ended <- c.Err()
			return nil
		case "sleep":
			time.Sleep(30 * time.Millisecond)
		case "panic":
			panic("boom")
		case "defer":
			pending = actor.Defer(c, d)
			return nil
		case "log":
			return actor.Respond(c, d, strings.Join(c.State(), ","))
		}
		if a, isAnswer := m.(Answer); isAnswer {
			pending.Resolve(a.Value)
			return nil
		}
		if ok {
			return actor.Respond(c, d, op)
		}
		return nil
	}, opts...)
}

// warm asks ref once, so that the key is active and, soon after, idle.
func warm(t *testing.T, ref actor.Ref[ProbeMsg]) {
	t.Helper()
	if _, err := actor.Ask(ctxT(t), ref, Do{Op: "warm"}); err != nil {
		t.Fatal(err)
	}
}

func TestAskNeverRunsItsHandlerOnTheAskingGoroutine(t *testing.T) {
	def := idleProbe("where", nil, nil)
	sys := newSystem(t, system.Config{}, def)
	ref := def.Ref(sys, "k")
	for i := range 200 {
		where, err := actor.Ask(ctxT(t), ref, Do{Op: "where"})
		if err != nil {
			t.Fatal(err)
		}
		if where != "queued" {
			t.Fatalf("ask %d: the handler ran on the asking goroutine", i)
		}
	}
}

func TestAskToAnIdleActorHoldsItsKeyAndMailMeanwhileWaits(t *testing.T) {
	g := newGate()
	def := idleProbe("idle", g, nil)
	sys := newSystem(t, system.Config{}, def)
	ref := def.Ref(sys, "k")
	warm(t, ref)
	res := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctxT(t), ref, Do{Op: "block"})
		res <- err
	}()
	recv(t, g.entered, "the handler to block")
	// Queued behind the running ask, handled after it, in order.
	for _, op := range []string{"n1", "n2"} {
		if err := ref.Tell(ctxT(t), Note{Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	close(g.open)
	if err := recv(t, res, "the blocked ask to return"); err != nil {
		t.Fatal(err)
	}
	got, err := actor.Ask(ctxT(t), ref, Do{Op: "log"})
	if err != nil || !strings.HasSuffix(got, "block,n1,n2,log") {
		t.Fatalf("ops = %q, %v; want ...block,n1,n2,log", got, err)
	}
}

func TestCancelledAskToAnIdleActorCancelsItsHandler(t *testing.T) {
	g, ended := newGate(), make(chan error, 1)
	def := idleProbe("idle-cancel", g, ended)
	sys := newSystem(t, system.Config{}, def)
	ref := def.Ref(sys, "k")
	warm(t, ref)
	ctx, cancel := context.WithCancel(ctxT(t))
	res := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, ref, Do{Op: "stall"})
		res <- err
	}()
	recv(t, g.entered, "the handler to start")
	cancel()
	mustIs(t, recv(t, res, "Ask to return after cancel"), context.Canceled)
	mustIs(t, recv(t, ended, "the handler to observe <-c.Done()"), context.Canceled)
	if got, err := actor.Ask(ctxT(t), ref, Do{Op: "after"}); err != nil || got != "after" {
		t.Errorf("Ask after a cancelled one = %q, %v", got, err)
	}
}

func TestAskTimeoutToAnIdleActorCancelsItsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan error, 1)
		def := idleProbe("idle-timeout", nil, ended, actor.WithAskTimeout(20*time.Millisecond))
		sys := newSystem(t, system.Config{}, def)
		ref := def.Ref(sys, "k")
		warm(t, ref)
		_, err := actor.Ask(context.Background(), ref, Do{Op: "stall"})
		mustIs(t, err, context.DeadlineExceeded)
		mustIs(t, recv(t, ended, "the handler's context to end"), context.Canceled)
	})
}

func TestReplyAfterTheDeadlineIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		def := idleProbe("idle-late", nil, nil, actor.WithAskTimeout(20*time.Millisecond))
		sys := newSystem(t, system.Config{}, def)
		ref := def.Ref(sys, "k")
		warm(t, ref)
		// The handler ignores its context and answers 10 ms late: the
		// answer does not count.
		_, err := actor.Ask(context.Background(), ref, Do{Op: "sleep"})
		mustIs(t, err, context.DeadlineExceeded)
		if got, err := actor.Ask(context.Background(), ref, Do{Op: "after"}); err != nil || got != "after" {
			t.Errorf("Ask after a late one = %q, %v", got, err)
		}
	})
}

func TestAskPanicFailsTheAskAndTheActorRestarts(t *testing.T) {
	def := idleProbe("idle-panic", nil, nil)
	var failed atomic.Int32
	sys := newSystem(t, system.Config{Observer: func(e system.Event) {
		if e.Kind == system.ActivationFailed {
			failed.Add(1)
		}
	}}, def)
	ref := def.Ref(sys, "k")
	warm(t, ref)
	_, err := actor.Ask(ctxT(t), ref, Do{Op: "panic"})
	mustIs(t, err, actor.ErrActorFailed)
	var pe *actor.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("errors.As PanicError: %#v", pe)
	}
	if got, err := actor.Ask(ctxT(t), ref, Do{Op: "ok"}); err != nil || got != "ok" {
		t.Errorf("Ask after the panic = %q, %v", got, err)
	}
	if failed.Load() != 1 {
		t.Errorf("%d activation failures observed, want 1", failed.Load())
	}
}

func TestAskToAnIdleActorWithADeferredReplyWaitsForIt(t *testing.T) {
	def := idleProbe("idle-defer", nil, nil)
	sys := newSystem(t, system.Config{}, def)
	ref := def.Ref(sys, "k")
	warm(t, ref)
	res := make(chan string, 1)
	go func() {
		got, err := actor.Ask(ctxT(t), ref, Do{Op: "defer"})
		if err != nil {
			got = err.Error()
		}
		res <- got
	}()
	waitUntil(t, "the deferring handler to run", func() bool {
		got, _ := actor.Ask(ctxT(t), ref, Do{Op: "log"})
		return strings.Contains(got, "defer")
	})
	if err := ref.Tell(ctxT(t), Answer{Value: "later"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, res, "the deferred reply"); got != "later" {
		t.Fatalf("deferred ask = %q, want later", got)
	}
}

// Replies given twice, or after their asker left, reach no later ask:
// each ask gets its own outcome however the earlier ones ended.
func TestLateAndRepeatedRepliesReachNoLaterAsk(t *testing.T) {
	pending := make(chan actor.Deferred[string], 1)
	def := actor.Define("late", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		d, ok := m.(Do)
		if !ok {
			return nil
		}
		switch d.Op {
		case "twice":
			actor.Respond(c, d, "first")
			return actor.Respond(c, d, "second")
		case "defer":
			pending <- actor.Defer(c, d)
			return nil
		}
		return actor.Respond(c, d, d.Op)
	})
	sys := newSystem(t, system.Config{}, def)
	ref := def.Ref(sys, "k")
	for i := range 200 {
		if got, err := actor.Ask(ctxT(t), ref, Do{Op: "twice"}); err != nil || got != "first" {
			t.Fatalf("round %d: ask answered twice = %q, %v; want first", i, got, err)
		}
		ctx, cancel := context.WithCancel(ctxT(t))
		res := make(chan error, 1)
		go func() {
			_, err := actor.Ask(ctx, ref, Do{Op: "defer"})
			res <- err
		}()
		d := recv(t, pending, "the deferring handler")
		cancel()
		mustIs(t, recv(t, res, "the cancelled ask"), context.Canceled)
		if d.Resolve("late") {
			t.Fatalf("round %d: a reply after its asker left was taken", i)
		}
		op := fmt.Sprint("n", i)
		if got, err := actor.Ask(ctxT(t), ref, Do{Op: op}); err != nil || got != op {
			t.Fatalf("round %d: ask = %q, %v; want %q", i, got, err, op)
		}
	}
}
