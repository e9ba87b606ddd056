package actor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

func TestHandlerContextCarriesTheAsksDeadline(t *testing.T) {
	deadlines := make(chan time.Time, 1)
	def := actor.Define("deadline", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		dl, _ := c.Deadline()
		deadlines <- dl
		return actor.Respond(c, m.(Do), "")
	})
	sys := newSystem(t, system.Config{}, def)
	want := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	if _, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, deadlines, "the deadline"); !got.Equal(want) {
		t.Errorf("c.Deadline() = %v, want the asker's %v", got, want)
	}
}

func TestStateSetBeforeAFailureIsWhatTheActorRestartsFrom(t *testing.T) {
	def := actor.Define("saved", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		switch op := opOf(m); op {
		case "set-then-fail":
			c.SetState(5)
			return errBroken
		case "update-panics":
			c.Update(func(n int) int { panic("no") })
		case "get":
			return actor.Respond(c, m.(Do), fmt.Sprint(c.State()))
		}
		return nil
	})
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	for _, op := range []string{"set-then-fail", "update-panics"} {
		if err := ref.Tell(ctx, Note{Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	// The SetState completed before the error; the Update never did.
	if got, err := actor.Ask(ctx, ref, Do{Op: "get"}); err != nil || got != "5" {
		t.Errorf("state after failures = %q, %v; want 5", got, err)
	}
}

func TestAfterReplacesAnEveryOfTheSameName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &opLog{}
		def := actor.Define("replace", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
			switch op := opOf(m); op {
			case "arm":
				c.Every("t", 10*time.Millisecond, Note{Op: "every"})
				c.After("t", 25*time.Millisecond, Note{Op: "after"})
			default:
				l.add(op)
			}
			return nil
		})
		sys := newSystem(t, system.Config{}, def)
		if err := def.Ref(sys, "k").Tell(context.Background(), Note{Op: "arm"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if want := []string{"after"}; !slices.Equal(l.get(), want) {
			t.Errorf("delivered %v, want %v", l.get(), want)
		}
	})
}

func TestTimerMessageThatFindsTheMailboxFullIsDroppedAndObserved(t *testing.T) {
	// In a bubble, the timer cannot fire before the test fills the mailbox.
	synctest.Test(t, func(t *testing.T) {
		g, evs := newGate(), newEvents()
		def := actor.Define("busy-timer", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
			switch opOf(m) {
			case "arm":
				c.After("late", time.Millisecond, Note{Op: "tick"})
				g.pass("arm")
			}
			return nil
		}, actor.WithMailbox(1, actor.Refuse))
		sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
		defer close(g.open)
		ref := def.Ref(sys, "k")
		if err := ref.Tell(context.Background(), Note{Op: "arm"}); err != nil {
			t.Fatal(err)
		}
		<-g.entered
		if err := ref.Tell(context.Background(), Note{Op: "fills"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		drops := evs.Snapshot()
		drops = slices.DeleteFunc(drops, func(e system.Event) bool { return e.Kind != system.MessageDropped })
		if len(drops) != 1 {
			t.Fatalf("MessageDropped events = %v, want the timer's", drops)
		}
		if !strings.Contains(drops[0].Reason, "late") {
			t.Errorf("MessageDropped reason %q does not name the timer", drops[0].Reason)
		}
		mustIs(t, drops[0].Err, actor.ErrMailboxFull)
	})
}

func TestSenderWaitingForRoomIsReleasedByClose(t *testing.T) {
	g := newGate()
	def := gatedProbe("waiters", g, &opLog{}, actor.WithMailbox(1, actor.Wait))
	sys, err := system.New(system.Config{Actors: []actor.Definition{def}})
	if err != nil {
		t.Fatal(err)
	}
	ref := def.Ref(sys, "k")
	if err := ref.Tell(context.Background(), Note{Op: "block"}); err != nil {
		t.Fatal(err)
	}
	recv(t, g.entered, "the handler to block")
	if err := ref.Tell(context.Background(), Note{Op: "fills"}); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() { waiting <- ref.Tell(context.Background(), Note{Op: "waits forever"}) }()
	waitUntil(t, "the sender waits", func() bool { return sys.Stats().Queued == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	go func() {
		<-ctx.Done()
		close(g.open) // the gate ignores cancellation; let it go after the deadline
	}()
	mustIs(t, sys.Close(ctx), context.DeadlineExceeded)
	err = recv(t, waiting, "the waiting sender to be released by Close")
	if err == nil {
		t.Fatal("a sender that waited for room through Close got its message accepted")
	}
	mustIs(t, err, actor.ErrSystemClosed)
}

func TestReleaseAfterRespondingStillAnswers(t *testing.T) {
	evs := newEvents()
	def := actor.Define("one-shot", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		c.Release()
		return actor.Respond(c, m.(Do), c.Key())
	})
	sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
	for range 3 {
		if got, err := actor.Ask(ctxT(t), def.Ref(sys, "k"), Do{}); err != nil || got != "k" {
			t.Fatalf("Ask = %q, %v", got, err)
		}
	}
	waitUntil(t, "three releases", func() bool { return evs.Count(is(system.ActivationEnded, "k")) == 3 })
	if n := evs.Count(is(system.ActivationStarted, "k")); n != 3 {
		t.Errorf("ActivationStarted events = %d, want 3", n)
	}
}

func TestInitPanicFailsTheMessageAndTheNextMessageRetries(t *testing.T) {
	var inits atomic.Int32
	def := actor.Define("bad-init", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		return actor.Respond(c, m.(Do), fmt.Sprint(c.State()))
	}).WithInit(func(string) int {
		if inits.Add(1) == 1 {
			panic("init boom")
		}
		return 42
	})
	evs := newEvents()
	sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
	ctx := ctxT(t)
	_, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{})
	mustIs(t, err, actor.ErrActorFailed)
	var pe *actor.PanicError
	if !errors.As(err, &pe) || pe.Value != "init boom" {
		t.Fatalf("error = %v, want the init's panic", err)
	}
	if got, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{}); err != nil || got != "42" {
		t.Fatalf("Ask after a failed init = %q, %v; want a fresh activation with 42", got, err)
	}
	if n := evs.Count(is(system.ActivationStarted, "k")); n != 1 {
		t.Errorf("ActivationStarted events = %d, want 1: the failed init never started", n)
	}
}

func TestReleaseResetsBecome(t *testing.T) {
	var other actor.Handler[int, ProbeMsg] = func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		if d, ok := m.(Do); ok {
			return actor.Respond(c, d, "other")
		}
		c.Release()
		return nil
	}
	def := actor.Define("shifty", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		if d, ok := m.(Do); ok {
			return actor.Respond(c, d, "initial")
		}
		c.Become(other)
		return nil
	})
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	for _, step := range []struct {
		tell bool
		want string
	}{{want: "initial"}, {tell: true}, {want: "other"}, {tell: true}, {want: "initial"}} {
		if step.tell {
			if err := ref.Tell(ctx, Note{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := actor.Ask(ctx, ref, Do{}); err != nil || got != step.want {
			t.Fatalf("Ask = %q, %v; want %q", got, err, step.want)
		}
	}
}

func TestPanickingPipeWrapDoesNotCrashOrBlameTheTarget(t *testing.T) {
	evs := newEvents()
	started, ended := make(chan string, 1), make(chan error, 1)
	slow := stalling("slow", started, ended, actor.WithAskTimeout(10*time.Millisecond))
	def := actor.Define("piper", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		switch m := m.(type) {
		case Note:
			wrap := func(s string, err error) ProbeMsg { panic("wrap boom") }
			if m.Op == "timeout" {
				actor.Pipe(c, slow.Ref(c.System(), "s"), Do{Op: "stall"}, wrap) // wrap runs on a timer
			} else {
				actor.Pipe(c, slow.Ref(c.System(), "s"), Do{Op: "answer"}, wrap) // wrap runs in slow's handler
			}
		case Do:
			return actor.Respond(c, m, "alive")
		}
		return nil
	})
	sys := newSystem(t, system.Config{Observer: evs.Observe}, def, slow)
	ctx := ctxT(t)
	for _, op := range []string{"timeout", "answer"} {
		if err := def.Ref(sys, "k").Tell(ctx, Note{Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "both piped answers to be dropped", func() bool {
		return evs.Count(func(e system.Event) bool {
			var pe *actor.PanicError
			return e.Kind == system.MessageDropped && e.Actor.Key == "k" && errors.As(e.Err, &pe)
		}) == 2
	})
	if n := evs.Count(func(e system.Event) bool { return e.Kind == system.ActivationFailed }); n != 0 {
		t.Errorf("a panicking wrap failed an actor: %v", evs.Snapshot())
	}
	if got, err := actor.Ask(ctx, def.Ref(sys, "k"), Do{}); err != nil || got != "alive" {
		t.Errorf("Ask = %q, %v", got, err)
	}
}

func TestCloseFailsAsksWhoseReplyWasDeferred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deferred := make(chan struct{}, 1)
		def := actor.Define("deferring", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
			actor.Defer(c, m.(Do)) // resolved by nobody
			deferred <- struct{}{}
			return nil
		})
		sys, err := system.New(system.Config{Actors: []actor.Definition{def}})
		if err != nil {
			t.Fatal(err)
		}
		res := make(chan error, 1)
		go func() {
			_, err := actor.Ask(context.Background(), def.Ref(sys, "k"), Do{})
			res <- err
		}()
		<-deferred
		start := time.Now()
		if err := sys.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		mustIs(t, <-res, actor.ErrSystemClosed)
		if waited := time.Since(start); waited > 0 {
			t.Errorf("the deferred ask failed %v after Close, want at once", waited)
		}
	})
}
