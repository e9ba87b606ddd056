package actor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

func TestContextGivesSelfKeyAndTheSystem(t *testing.T) {
	var caller *actor.Def[int, ProbeMsg]
	var sys *system.System
	caller = actor.Define("caller", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		d := m.(Do)
		if c.Self() != caller.Ref(sys, c.Key()) {
			return fmt.Errorf("Self() = %#v, want the system's ref of %s", c.Self(), c.Key())
		}
		if c.Self() != caller.Ref(c.System(), c.Key()) {
			return fmt.Errorf("Self() differs from the ref taken through c.System()")
		}
		target := counter.Ref(c.System(), d.Op)
		if err := target.Tell(c, Add{N: 2}); err != nil {
			return err
		}
		n, err := actor.Ask(c, target, Get{})
		if err != nil {
			return err
		}
		return actor.Respond(c, d, fmt.Sprintf("%v %s %d", c.Self(), c.Key(), n))
	})
	sys = newSystem(t, system.Config{}, caller, counter)
	got, err := actor.Ask(ctxT(t), caller.Ref(sys, "me"), Do{Op: "other"})
	if err != nil || got != "caller/me me 2" {
		t.Fatalf("Ask = %q, %v; want \"caller/me me 2\"", got, err)
	}
}

// Tally is a state with a slice, to show the safe way to change state.
type Tally struct {
	Seen []string
	N    int
}

func TestStateStartsFromInitAndChangesBySetStateAndUpdate(t *testing.T) {
	def := actor.Define("tally", func(c *actor.Context[Tally, ProbeMsg], m ProbeMsg) error {
		switch m := m.(type) {
		case Note:
			if m.Op == "reset" {
				c.SetState(Tally{})
				return nil
			}
			c.Update(func(s Tally) Tally {
				// Build a new value: never append into the saved slice in place.
				return Tally{Seen: append(slices.Clip(s.Seen), m.Op), N: s.N + 1}
			})
		case Do:
			s := c.State()
			return actor.Respond(c, m, fmt.Sprintf("%d %v", s.N, s.Seen))
		}
		return nil
	}).WithInit(func(key string) Tally { return Tally{Seen: []string{"init:" + key}} })
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	if got, err := actor.Ask(ctx, ref, Do{}); err != nil || got != "0 [init:k]" {
		t.Fatalf("initial state = %q, %v; want WithInit's value", got, err)
	}
	for _, op := range []string{"a", "b"} {
		if err := ref.Tell(ctx, Note{Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := actor.Ask(ctx, ref, Do{}); err != nil || got != "2 [init:k a b]" {
		t.Fatalf("state after two Updates = %q, %v", got, err)
	}
	if err := ref.Tell(ctx, Note{Op: "reset"}); err != nil {
		t.Fatal(err)
	}
	if got, err := actor.Ask(ctx, ref, Do{}); err != nil || got != "0 []" {
		t.Fatalf("state after SetState = %q, %v", got, err)
	}
}

func TestBecomeSwitchesBehaviourKeepsStateAndResetsOnRestart(t *testing.T) {
	var angry actor.Handler[int, ProbeMsg]
	calm := func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		c.Update(func(n int) int { return n + 1 })
		switch m := m.(type) {
		case Note:
			if m.Op == "provoke" {
				c.Become(angry)
			}
		case Do:
			return actor.Respond(c, m, fmt.Sprintf("calm %d", c.State()))
		}
		return nil
	}
	angry = func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		c.Update(func(n int) int { return n + 1 })
		switch m := m.(type) {
		case Note:
			if m.Op == "fail" {
				return errBroken
			}
		case Do:
			return actor.Respond(c, m, fmt.Sprintf("angry %d", c.State()))
		}
		return nil
	}
	def := actor.Define("mood", calm)
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	ask := func(want string) {
		t.Helper()
		if got, err := actor.Ask(ctx, ref, Do{}); err != nil || got != want {
			t.Fatalf("Ask = %q, %v; want %q", got, err, want)
		}
	}
	ask("calm 1")
	if err := ref.Tell(ctx, Note{Op: "provoke"}); err != nil {
		t.Fatal(err)
	}
	ask("angry 3")
	if err := ref.Tell(ctx, Note{Op: "fail"}); err != nil {
		t.Fatal(err)
	}
	// The restart goes back to the definition's handler; the state
	// saved before the failure is kept.
	ask("calm 5")
}

func TestTimerAfterFiresOnceAndANameReplacesItsSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &opLog{}
		def := actor.Define("after", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
			switch op := opOf(m); op {
			case "arm":
				c.After("t", 50*time.Millisecond, Note{Op: "first"})
				c.After("t", 10*time.Millisecond, Note{Op: "second"}) // replaces "first"
				c.After("u", 30*time.Millisecond, Note{Op: "third"})
			default:
				l.add(fmt.Sprintf("%s@%v", op, time.Since(start)))
			}
			return nil
		})
		sys := newSystem(t, system.Config{}, def)
		start = time.Now()
		if err := def.Ref(sys, "k").Tell(context.Background(), Note{Op: "arm"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		want := []string{"second@10ms", "third@30ms"}
		if !slices.Equal(l.get(), want) {
			t.Errorf("timers delivered %v, want %v", l.get(), want)
		}
	})
}

// start is the bubble's start time for timer tests.
var start time.Time

func TestTimerEveryRepeatsUntilCancelledAndKeepsTheKeyActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs := newEvents()
		beats := 0
		cancelled := make(chan bool, 2)
		def := actor.Define("every", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
			switch opOf(m) {
			case "arm":
				c.Every("beat", 100*time.Millisecond, Note{Op: "ignored"})
				c.Every("beat", 100*time.Millisecond, Note{Op: "beat"}) // replaces
			case "beat":
				beats++
			case "stop":
				cancelled <- c.CancelTimer("beat")
				cancelled <- c.CancelTimer("no such timer")
			case "ignored":
				return errBroken
			}
			return nil
		}, actor.WithIdleTimeout(50*time.Millisecond))
		sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
		ref := def.Ref(sys, "k")
		if err := ref.Tell(context.Background(), Note{Op: "arm"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second + 50*time.Millisecond)
		synctest.Wait()
		if n := evs.Count(is(system.ActivationEnded, "k")); n != 0 {
			t.Fatalf("a key with a live Every timer idled out: %v", evs.Snapshot())
		}
		if n := evs.Count(is(system.ActivationFailed, "k")); n != 0 {
			t.Fatalf("the replaced Every timer still fired: %v", evs.Snapshot())
		}
		if err := ref.Tell(context.Background(), Note{Op: "stop"}); err != nil {
			t.Fatal(err)
		}
		if !<-cancelled {
			t.Error("CancelTimer of a live timer reported false")
		}
		if <-cancelled {
			t.Error("CancelTimer of an unknown timer reported true")
		}
		if beats != 10 {
			t.Errorf("Every(100ms) fired %d times in 1.05s, want 10", beats)
		}
		time.Sleep(time.Minute) // fake time: well past the idle timeout and any sweep period
		synctest.Wait()
		if beats != 10 {
			t.Errorf("Every kept firing after CancelTimer: %d beats", beats)
		}
		ended := evs.Snapshot()
		if len(ended) != 2 || ended[1].Kind != system.ActivationEnded || ended[1].Reason != "idle" {
			t.Errorf("events = %v, want the key to idle out once its timer is cancelled", ended)
		}
	})
}

// Piped is the answer of a pipe, told back to the piping actor.
type Piped struct {
	N   int
	Err error
}

func (Piped) probeMsg() {}

func TestPipeDeliversTheAnswerAsAMessageWithoutBlocking(t *testing.T) {
	var waiting actor.Deferred[string]
	def := actor.Define("piper", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		wrap := func(n int, err error) ProbeMsg { return Piped{N: n, Err: err} }
		switch m := m.(type) {
		case Do:
			waiting = actor.Defer(c, m)
			switch m.Op {
			case "counter":
				actor.Pipe(c, counter.Ref(c.System(), "c"), Get{}, wrap)
			case "unknown":
				actor.Pipe(c, actor.Define("elsewhere", counterHandler).Ref(c.System(), "x"), Get{}, wrap)
			}
		case Note: // the handler is free while the pipe waits
			if err := counter.Ref(c.System(), "c").Tell(c, Add{N: 5}); err != nil {
				return err
			}
		case Piped:
			waiting.Resolve(fmt.Sprintf("%d %v", m.N, m.Err))
		}
		return nil
	})
	sys := newSystem(t, system.Config{}, def, counter)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	if got, err := actor.Ask(ctx, ref, Do{Op: "counter"}); err != nil || got != "0 <nil>" {
		t.Fatalf("piped Get = %q, %v; want \"0 <nil>\"", got, err)
	}
	if err := ref.Tell(ctx, Note{}); err != nil {
		t.Fatal(err)
	}
	if got, err := actor.Ask(ctx, ref, Do{Op: "counter"}); err != nil || got != "5 <nil>" {
		t.Fatalf("piped Get = %q, %v; want \"5 <nil>\"", got, err)
	}
	got, err := actor.Ask(ctx, ref, Do{Op: "unknown"})
	if err != nil || !strings.Contains(got, actor.ErrUnknownActor.Error()) {
		t.Fatalf("pipe to an unknown type answered %q, %v; want ErrUnknownActor", got, err)
	}
}

func TestPipeLeavesTheHandlerFreeAndFailsAtTheTargetsAskTimeout(t *testing.T) {
	// In a bubble, the ask timeout cannot pass before the slow handler starts.
	synctest.Test(t, func(t *testing.T) {
		g, l := newGate(), &opLog{}
		gated := gatedProbe("gated", g, l, actor.WithAskTimeout(time.Hour))
		started, ended := make(chan string, 1), make(chan error, 1)
		slow := stalling("slow", started, ended, actor.WithAskTimeout(20*time.Millisecond))
		notes := make(chan string, 1)
		piped := make(chan Piped, 1)
		def := actor.Define("piper", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
			wrap := func(s string, err error) ProbeMsg { return Piped{N: len(s), Err: err} }
			switch m := m.(type) {
			case Note:
				switch m.Op {
				case "pipe-gated":
					actor.Pipe(c, gated.Ref(c.System(), "g"), Do{Op: "block"}, wrap)
				case "pipe-slow":
					actor.Pipe(c, slow.Ref(c.System(), "s"), Do{Op: "stall"}, wrap)
				default:
					notes <- m.Op
				}
			case Piped:
				piped <- m
			}
			return nil
		})
		sys := newSystem(t, system.Config{}, def, gated, slow)
		ref := def.Ref(sys, "k")
		ctx := ctxT(t)
		if err := ref.Tell(ctx, Note{Op: "pipe-gated"}); err != nil {
			t.Fatal(err)
		}
		recv(t, g.entered, "the piped ask to reach the gated actor")
		if err := ref.Tell(ctx, Note{Op: "free"}); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, notes, "the piping actor to handle a message while its pipe waits"); got != "free" {
			t.Fatalf("got %q", got)
		}
		close(g.open)
		if p := recv(t, piped, "the gated answer"); p.Err != nil || p.N != len("block") {
			t.Fatalf("piped answer = %+v, want the reply \"block\"", p)
		}

		if err := ref.Tell(ctx, Note{Op: "pipe-slow"}); err != nil {
			t.Fatal(err)
		}
		p := recv(t, piped, "the piped ask to time out")
		mustIs(t, p.Err, context.DeadlineExceeded)
		recv(t, ended, "the slow handler's context to end")
	})
}

func TestReleaseEndsTheActivationAndTheNextMessageStartsFresh(t *testing.T) {
	evs := newEvents()
	def := actor.Define("releasing", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		switch m := m.(type) {
		case Note:
			switch m.Op {
			case "release":
				c.Release()
			case "arm":
				c.Every("tick", time.Hour, Note{Op: "never"})
			default:
				c.Update(func(n int) int { return n + 1 })
			}
		case Do:
			return actor.Respond(c, m, fmt.Sprint(c.State()))
		}
		return nil
	}).WithInit(func(string) int { return 100 })
	sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	for _, op := range []string{"arm", "inc", "inc", "release"} {
		if err := ref.Tell(ctx, Note{Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	ev := evs.WaitFor(t, "ActivationEnded", is(system.ActivationEnded, "k"))
	if ev.Reason != "released" {
		t.Errorf("ActivationEnded reason = %q, want released", ev.Reason)
	}
	// Released with a live timer: the timer goes with the activation.
	waitUntil(t, "the released key to leave the table", func() bool { return sys.Stats().Active == 0 })
	if got, err := actor.Ask(ctx, ref, Do{}); err != nil || got != "100" {
		t.Fatalf("state after release = %q, %v; want the initial 100", got, err)
	}
	if n := evs.Count(is(system.ActivationStarted, "k")); n != 2 {
		t.Errorf("ActivationStarted events = %d, want 2 (before and after release)", n)
	}
}

func TestPipeToAFullWaitMailboxFailsAtOnceInsteadOfBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, l := newGate(), &opLog{}
		target := gatedProbe("target", g, l, actor.WithMailbox(1, actor.Wait))
		piped := make(chan error, 1)
		def := actor.Define("piper", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
			switch m := m.(type) {
			case Note:
				actor.Pipe(c, target.Ref(c.System(), "t"), Do{Op: "x"}, func(s string, err error) ProbeMsg { return Piped{Err: err} })
			case Piped:
				piped <- m.Err
			}
			return nil
		})
		sys := newSystem(t, system.Config{}, def, target)
		defer close(g.open)
		ref := target.Ref(sys, "t")
		for _, op := range []string{"block", "fills"} {
			if err := ref.Tell(context.Background(), Note{Op: op}); err != nil {
				t.Fatal(err)
			}
			if op == "block" {
				<-g.entered
			}
		}
		if err := def.Ref(sys, "p").Tell(context.Background(), Note{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case err := <-piped:
			mustIs(t, err, actor.ErrMailboxFull)
		default:
			t.Fatal("the piping handler is blocked by a full Wait mailbox")
		}
	})
}

// A handler's Context is reused once the handler returns (by the cell's
// next message, or by another cell after a one-off run). Contexts derived
// from it and cancelled before the handler returns must not read it
// afterwards: they attach to a context of package context instead of
// starting a goroutine that watches the Context. Cold starts and warm
// cells both run here, under -race.
func TestContextsDerivedInHandlersDoNotReadItAfterward(t *testing.T) {
	def := actor.Define("derive", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		ctx, cancel := context.WithTimeout(c, time.Second)
		defer cancel()
		stop := context.AfterFunc(c, func() {})
		defer stop()
		if err := ctx.Err(); err != nil {
			return err
		}
		if d, ok := m.(Do); ok {
			return actor.Respond(c, d, d.Op)
		}
		return nil
	}, actor.WithIdleTimeout(time.Millisecond))
	sys := newSystem(t, system.Config{}, def)
	var failed atomic.Value
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				ref := def.Ref(sys, fmt.Sprint("k", (g*7+i)%50))
				var err error
				if i%2 == 0 {
					err = ref.Tell(ctxT(t), Note{Op: "n"})
				} else {
					_, err = actor.Ask(ctxT(t), ref, Do{Op: "a"})
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
}
