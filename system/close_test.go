package system_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
	"go.uber.org/goleak"
)

func startSystem(t *testing.T, cfg system.Config, defs ...actor.Definition) *system.System {
	t.Helper()
	cfg.Actors = defs
	sys, err := system.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

func TestCloseRefusesNewWorkAndLetsQueuedWorkFinish(t *testing.T) {
	g, l := newGate(), &opLog{}
	def := probe("draining", g, l)
	sys := startSystem(t, system.Config{}, def)
	ctx := systemtest.Ctx(t)
	ref := def.Ref(sys, "k")
	if err := ref.Tell(ctx, Note{Op: "block"}); err != nil {
		t.Fatal(err)
	}
	systemtest.Recv(t, g.entered, "the handler to block")
	asked := make(chan string, 1)
	for _, op := range []string{"q1", "q2"} {
		if err := ref.Tell(ctx, Note{Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		got, err := actor.Ask(ctx, ref, Do{Op: "q3"})
		if err != nil {
			got = err.Error()
		}
		asked <- got
	}()
	systemtest.WaitUntil(t, "the ask is queued", func() bool { return sys.Stats().Queued == 3 })

	closed := make(chan error, 1)
	go func() { closed <- sys.Close(ctx) }()
	systemtest.WaitUntil(t, "Close to refuse new work", func() bool {
		return errors.Is(def.Ref(sys, "other").Tell(ctx, Note{Op: "late"}), actor.ErrSystemClosed)
	})
	mustIs(t, ref.Tell(ctx, Note{Op: "late"}), actor.ErrSystemClosed)
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v while a handler was still running", err)
	default:
	}
	close(g.open)
	if err := systemtest.Recv(t, closed, "Close to return"); err != nil {
		t.Fatalf("Close = %v, want nil: the work finished before the deadline", err)
	}
	if got := systemtest.Recv(t, asked, "the queued ask"); got != "q3 4" {
		t.Errorf("queued ask answered %q during Close, want \"q3 4\"", got)
	}
	// (Tells to "other" sent before Close took effect are handled too.)
	got := slices.DeleteFunc(l.get(), func(op string) bool { return op == "other:late" })
	if want := []string{"k:block", "k:q1", "k:q2", "k:q3"}; !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	goleak.VerifyNone(t)
}

func TestCloseCancelsHandlersAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sawDone := make(chan error, 1)
		started := make(chan struct{})
		def := actor.Define("stubborn", func(c *actor.Context[int, Msg], m Msg) error {
			if opOf(m) == "stall" {
				close(started)
				<-c.Done()
				sawDone <- c.Err()
				return c.Err()
			}
			if d, ok := m.(Do); ok {
				return actor.Respond(c, d, "late")
			}
			return nil
		})
		sys := startSystem(t, system.Config{}, def)
		ref := def.Ref(sys, "k")
		if err := ref.Tell(context.Background(), Note{Op: "stall"}); err != nil {
			t.Fatal(err)
		}
		<-started
		asked := make(chan error, 1)
		go func() {
			_, err := actor.Ask(context.Background(), ref, Do{Op: "queued"})
			asked <- err
		}()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		begin := time.Now()
		err := sys.Close(ctx)
		mustIs(t, err, context.DeadlineExceeded)
		if took := time.Since(begin); took != 100*time.Millisecond {
			t.Errorf("Close took %v, want its 100ms deadline (the handler returns when cancelled)", took)
		}
		if herr := <-sawDone; herr == nil {
			t.Error("the handler's c.Err() is nil after the Close deadline")
		}
		mustIs(t, <-asked, actor.ErrSystemClosed)
	})
}

func TestCloseStopsTimersAndFailsMailboxesInBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, evs := &opLog{}, systemtest.NewEvents(systemtest.Limit)
		def := actor.Define("ticking", func(c *actor.Context[int, Msg], m Msg) error {
			switch op := opOf(m); op {
			case "arm":
				c.Every("tick", 10*time.Millisecond, Note{Op: "tick"})
			case "error":
				return errBroken
			default:
				l.add(c.Key() + ":" + op)
			}
			return nil
		}, actor.WithBackoff(time.Hour, time.Hour))
		sys := startSystem(t, system.Config{Observer: evs.Observe}, def)
		ctx := context.Background()
		if err := def.Ref(sys, "timer").Tell(ctx, Note{Op: "arm"}); err != nil {
			t.Fatal(err)
		}
		// A key in an hour-long backoff, with an ask waiting behind it.
		broken := def.Ref(sys, "broken")
		if err := broken.Tell(ctx, Note{Op: "error"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		asked := make(chan error, 1)
		go func() {
			_, err := actor.Ask(ctx, broken, Do{Op: "behind"})
			asked <- err
		}()
		time.Sleep(55 * time.Millisecond)
		synctest.Wait()
		ticks := len(l.get())
		if ticks != 5 {
			t.Fatalf("ticks before Close = %d, want 5", ticks)
		}
		begin := time.Now()
		if err := sys.Close(ctx); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if took := time.Since(begin); took > 50*time.Millisecond {
			t.Errorf("Close took %v: it must not wait for a backoff", took)
		}
		mustIs(t, <-asked, actor.ErrSystemClosed)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(l.get()); n != ticks {
			t.Errorf("the timer fired %d times after Close", n-ticks)
		}
	})
}

func TestCloseLeavesNoGoroutineBehind(t *testing.T) {
	g := newGate()
	body := make(chan struct{}, 4)
	def := probe("busy", g, nil, actor.WithBackoff(time.Hour, time.Hour))
	runner := actor.Define("runner", func(*actor.Context[int, Msg], Msg) error { return nil }).
		WithRun(func(ctx context.Context, self actor.Ref[Msg]) error {
			body <- struct{}{}
			<-ctx.Done()
			return nil
		})
	sys := startSystem(t, system.Config{}, def, runner)
	ctx := systemtest.Ctx(t)
	for i, op := range []string{"block", "error", "x"} {
		if err := def.Ref(sys, string(rune('a'+i))).Tell(ctx, Note{Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	if err := runner.Ref(sys, "r").Tell(ctx, Note{}); err != nil {
		t.Fatal(err)
	}
	systemtest.Recv(t, g.entered, "a handler to block")
	systemtest.Recv(t, body, "the body to run")
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	go func() {
		<-cctx.Done()
		close(g.open) // the gate ignores cancellation; let it go after the deadline
	}()
	err := sys.Close(cctx)
	mustIs(t, err, context.DeadlineExceeded)
	goleak.VerifyNone(t)
}

func TestConcurrentClosesAllReturnAfterTheFirstFinishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		def := probe("closing", g, nil)
		sys := startSystem(t, system.Config{}, def)
		ctx := context.Background()
		if err := def.Ref(sys, "k").Tell(ctx, Note{Op: "block"}); err != nil {
			t.Fatal(err)
		}
		<-g.entered
		first, second := make(chan error, 1), make(chan error, 1)
		go func() { first <- sys.Close(ctx) }()
		synctest.Wait()
		go func() { second <- sys.Close(ctx) }()
		synctest.Wait()
		select {
		case err := <-second:
			t.Fatalf("a second Close returned %v while the first still drained", err)
		case err := <-first:
			t.Fatalf("Close returned %v while a handler still ran", err)
		default:
		}
		close(g.open)
		if err := <-first; err != nil {
			t.Errorf("first Close = %v", err)
		}
		if err := <-second; err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
	})
}
