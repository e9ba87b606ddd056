package actor_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// gatedProbe defines an actor that logs every op and stops at g for ops
// named "block".
func gatedProbe(name string, g *gate, l *opLog, opts ...actor.Option) *actor.Def[int, ProbeMsg] {
	return actor.Define(name, func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		op := opOf(m)
		l.add(op)
		if op == "block" {
			g.pass(op)
		}
		if d, ok := m.(Do); ok {
			return actor.Respond(c, d, op)
		}
		return nil
	}, opts...)
}

func TestTellUnderRefuseFailsAtOnceWhenTheMailboxIsFull(t *testing.T) {
	g, l, evs := newGate(), &opLog{}, newEvents()
	def := gatedProbe("refuse", g, l, actor.WithMailbox(2, actor.Refuse))
	sys := newSystem(t, system.Config{Observer: evs.Observe}, def)
	defer close(g.open)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")

	if err := ref.Tell(ctx, Note{Op: "block"}); err != nil {
		t.Fatal(err)
	}
	recv(t, g.entered, "the handler to block")
	for _, op := range []string{"q1", "q2"} {
		if err := ref.Tell(ctx, Note{Op: op}); err != nil {
			t.Fatalf("Tell %s into a mailbox with room: %v", op, err)
		}
	}
	// A full mailbox: Tell must return at once, even with a context
	// that never ends.
	done := make(chan error, 1)
	go func() { done <- ref.Tell(context.Background(), Note{Op: "overflow"}) }()
	mustIs(t, recv(t, done, "Tell on a full Refuse mailbox to return"), actor.ErrMailboxFull)
	_, err := actor.Ask(ctx, ref, Do{Op: "ask-overflow"})
	mustIs(t, err, actor.ErrMailboxFull)
	evs.WaitFor(t, "MailboxFull", is(system.MailboxFull, "k"))

	if st := sys.Stats(); st.Queued != 2 || st.DeepestMailbox != 2 {
		t.Errorf("Stats with a full mailbox of 2 = %+v, want Queued 2, DeepestMailbox 2", st)
	}
}

func TestTellUnderWaitWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, l := newGate(), &opLog{}
		def := gatedProbe("wait", g, l, actor.WithMailbox(1, actor.Wait))
		sys := newSystem(t, system.Config{}, def)
		ctx := context.Background()
		ref := def.Ref(sys, "k")
		if err := ref.Tell(ctx, Note{Op: "block"}); err != nil {
			t.Fatal(err)
		}
		<-g.entered
		if err := ref.Tell(ctx, Note{Op: "fills"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- ref.Tell(ctx, Note{Op: "waits"}) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Tell on a full Wait mailbox returned %v while the mailbox was still full", err)
		default:
		}
		close(g.open)
		if err := <-done; err != nil {
			t.Fatalf("Tell that waited for room: %v", err)
		}
		if got, err := actor.Ask(ctx, ref, Do{Op: "last"}); err != nil || got != "last" {
			t.Fatalf("Ask = %q, %v", got, err)
		}
		if want := []string{"block", "fills", "waits", "last"}; !slices.Equal(l.get(), want) {
			t.Errorf("handled %v, want %v", l.get(), want)
		}
	})
}

func TestTellUnderWaitGivesUpWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, l := newGate(), &opLog{}
		def := gatedProbe("wait", g, l, actor.WithMailbox(1, actor.Wait))
		sys := newSystem(t, system.Config{}, def)
		defer close(g.open)
		ref := def.Ref(sys, "k")
		if err := ref.Tell(context.Background(), Note{Op: "block"}); err != nil {
			t.Fatal(err)
		}
		<-g.entered
		if err := ref.Tell(context.Background(), Note{Op: "fills"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := ref.Tell(ctx, Note{Op: "gives up"})
		mustIs(t, err, actor.ErrMailboxFull)
		mustIs(t, err, context.DeadlineExceeded)
		if waited := time.Since(start); waited != 50*time.Millisecond {
			t.Errorf("Tell waited %v, want exactly the context's 50ms", waited)
		}

		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		_, err = actor.Ask(cctx, ref, Do{Op: "cancelled"})
		mustIs(t, err, actor.ErrMailboxFull)
		mustIs(t, err, context.Canceled)
	})
}

func TestSendAfterCloseFailsWithErrSystemClosed(t *testing.T) {
	sys, err := system.New(system.Config{Actors: []actor.Definition{counter}})
	if err != nil {
		t.Fatal(err)
	}
	ref := counter.Ref(sys, "k")
	ctx := ctxT(t)
	if err := ref.Tell(ctx, Add{N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := sys.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mustIs(t, ref.Tell(ctx, Add{N: 1}), actor.ErrSystemClosed)
	_, err = actor.Ask(ctx, ref, Get{})
	mustIs(t, err, actor.ErrSystemClosed)
	mustIs(t, counter.Ref(sys, "fresh").Tell(ctx, Add{N: 1}), actor.ErrSystemClosed)
	if err := sys.Close(ctx); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if errors.Is(actor.ErrSystemClosed, actor.ErrMailboxFull) {
		t.Error("sentinels must be distinct")
	}
}

func TestAskWithoutDeadlineWaitsForRoomOnlyUntilItsAskTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, l := newGate(), &opLog{}
		def := gatedProbe("wait", g, l, actor.WithMailbox(1, actor.Wait), actor.WithAskTimeout(20*time.Millisecond))
		sys := newSystem(t, system.Config{}, def)
		defer close(g.open)
		ref := def.Ref(sys, "k")
		for _, op := range []string{"block", "fills"} {
			if err := ref.Tell(context.Background(), Note{Op: op}); err != nil {
				t.Fatal(err)
			}
			if op == "block" {
				<-g.entered
			}
		}
		start := time.Now()
		_, err := actor.Ask(context.Background(), ref, Do{Op: "waits"})
		mustIs(t, err, actor.ErrMailboxFull)
		mustIs(t, err, context.DeadlineExceeded)
		if waited := time.Since(start); waited != 20*time.Millisecond {
			t.Errorf("Ask waited %v for room, want its 20ms ask timeout", waited)
		}
	})
}
