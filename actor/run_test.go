package actor_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// bodyProbe reports each run of a proactive body and how it ended.
type bodyProbe struct {
	started chan string
	stopped chan error
}

func newBodyProbe() *bodyProbe {
	return &bodyProbe{started: make(chan string, 16), stopped: make(chan error, 16)}
}

// runner defines a proactive actor. Its body tells itself a Note,
// reports its start, then waits for its context; fail decides how the n-th
// run (from 1) ends early: "error", "panic" or "" to wait.
func runner(name string, p *bodyProbe, fail func(n int) string, opts ...actor.Option) *actor.Def[int, ProbeMsg] {
	var runs atomic.Int32
	return actor.Define(name, func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		switch m := m.(type) {
		case Note:
			if m.Op == "release" {
				c.Release()
			}
			c.Update(func(n int) int { return n + 1 })
		case Do:
			return actor.Respond(c, m, "ok")
		}
		return nil
	}, opts...).WithRun(func(ctx context.Context, self actor.Ref[ProbeMsg]) error {
		n := int(runs.Add(1))
		if err := self.Tell(ctx, Note{Op: "from body"}); err != nil {
			return err
		}
		p.started <- self.String()
		switch fail(n) {
		case "error":
			return errBroken
		case "panic":
			panic("body boom")
		}
		<-ctx.Done()
		p.stopped <- ctx.Err()
		return ctx.Err()
	})
}

func never(int) string { return "" }

func TestRunBodyStartsOnActivationAndStopsOnRelease(t *testing.T) {
	p, evs := newBodyProbe(), newEvents()
	def := runner("poller", p, never)
	sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	select {
	case <-p.started:
		t.Fatal("the body ran before the key was activated")
	default:
	}
	if _, err := actor.Ask(ctx, ref, Do{}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, p.started, "the body to start"); got != "poller/k" {
		t.Errorf("body's self = %s, want poller/k", got)
	}
	if err := ref.Tell(ctx, Note{Op: "release"}); err != nil {
		t.Fatal(err)
	}
	mustIs(t, recv(t, p.stopped, "the body to be cancelled at release"), context.Canceled)
	evs.WaitFor(t, "ActivationEnded released", func(e system.Event) bool {
		return e.Kind == system.ActivationEnded && e.Reason == "released"
	})
	// The next message activates the key again, and its body with it.
	if _, err := actor.Ask(ctx, ref, Do{}); err != nil {
		t.Fatal(err)
	}
	recv(t, p.started, "the body to start again")
}

func TestRunBodyIsCancelledByClose(t *testing.T) {
	p := newBodyProbe()
	def := runner("poller", p, never)
	sys, err := system.New(system.Config{Actors: []actor.Definition{def}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for _, k := range []string{"a", "b"} {
		if err := def.Ref(sys, k).Tell(ctx, Note{}); err != nil {
			t.Fatal(err)
		}
		recv(t, p.started, "the body to start")
	}
	if err := sys.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range 2 {
		mustIs(t, recv(t, p.stopped, "the body to be cancelled by Close"), context.Canceled)
	}
}

func TestRunBodyRestartsAfterErrorAndPanicWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, evs := newBodyProbe(), newEvents()
		def := runner("flaky", p, func(n int) string {
			switch n {
			case 1:
				return "error"
			case 2:
				return "panic"
			}
			return ""
		}, actor.WithBackoff(100*time.Millisecond, 150*time.Millisecond))
		sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
		begin := time.Now()
		if err := def.Ref(sys, "k").Tell(context.Background(), Note{}); err != nil {
			t.Fatal(err)
		}
		var at []time.Duration
		for range 3 {
			<-p.started
			at = append(at, time.Since(begin))
		}
		// Backoff doubles per consecutive failure, capped at the max.
		if want := []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond}; !slices.Equal(at, want) {
			t.Errorf("body runs started at %v, want %v", at, want)
		}
		fails := 0
		var sawPanic, sawErr bool
		for _, e := range evs.Snapshot() {
			if e.Kind != system.ActivationFailed {
				continue
			}
			fails++
			var pe *actor.PanicError
			sawPanic = sawPanic || errors.As(e.Err, &pe)
			sawErr = sawErr || errors.Is(e.Err, errBroken)
		}
		if fails != 2 || !sawPanic || !sawErr {
			t.Errorf("ActivationFailed events: %d (error %v, panic %v), want one for the error and one for the panic", fails, sawErr, sawPanic)
		}
		if r := sys.Stats().Restarts; r != 2 {
			t.Errorf("Stats.Restarts = %d, want 2", r)
		}
		// The body's failures do not fail the handler's activation.
		got, err := actor.Ask(context.Background(), def.Ref(sys, "k"), Do{})
		if err != nil || got != "ok" {
			t.Errorf("Ask = %q, %v", got, err)
		}
	})
}

func TestKeyWithARunningBodyDoesNotIdleOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, evs := newBodyProbe(), newEvents()
		def := runner("poller", p, never, actor.WithIdleTimeout(10*time.Millisecond))
		sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
		if err := def.Ref(sys, "k").Tell(context.Background(), Note{}); err != nil {
			t.Fatal(err)
		}
		<-p.started
		time.Sleep(time.Minute) // fake time: thousands of idle timeouts
		synctest.Wait()
		if n := evs.Count(is(system.ActivationEnded, "k")); n != 0 {
			t.Fatalf("a key with a running body idled out: %v", evs.Snapshot())
		}
		if n := sys.Stats().Active; n != 1 {
			t.Errorf("Stats.Active = %d, want 1", n)
		}
	})
}
