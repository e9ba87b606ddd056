package actor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// Tests for lessons other actor systems learned in production
// (docs/lessons.md): replies lost to a racing non-blocking path, and
// inboxes that grow without bound.

// Ergo wrote replies into an unbuffered channel with a non-blocking
// select, dropping those that arrived as the asker stopped waiting. Here
// a deferred reply races its asker's cancellation, many times: whatever
// the interleaving, Resolve reports true exactly when the asker got the
// value, and false exactly when the asker got its cancellation, so no
// reply is both accepted and lost.
func TestAReplyRacingItsAskersCancelIsTakenExactlyWhenResolveSaysSo(t *testing.T) {
	handed := make(chan actor.Deferred[string], 1)
	def := actor.Define("racing-reply", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
		if d, ok := m.(Do); ok {
			handed <- actor.Defer(c, d)
		}
		return nil
	})
	sys := newSystem(t, system.Config{}, def)
	ref := def.Ref(sys, "k")
	const rounds = 300
	taken, cancelled := 0, 0
	for i := range rounds {
		ctx, cancel := context.WithCancel(ctxT(t))
		type outcome struct {
			v   string
			err error
		}
		asked := make(chan outcome, 1)
		go func() {
			v, err := actor.Ask(ctx, ref, Do{Op: "race"})
			asked <- outcome{v, err}
		}()
		d := recv(t, handed, "the handler to defer its reply")
		want := fmt.Sprint("reply ", i)
		var resolved bool
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; resolved = d.Resolve(want) }()
		go func() { defer wg.Done(); <-start; cancel() }()
		close(start)
		wg.Wait()
		got := recv(t, asked, "the ask to return")
		switch {
		case resolved && (got.err != nil || got.v != want):
			t.Fatalf("round %d: Resolve reported the asker waiting, yet the asker got %q, %v: the reply was lost", i, got.v, got.err)
		case !resolved && !errors.Is(got.err, context.Canceled):
			t.Fatalf("round %d: Resolve reported nobody waiting, yet the asker got %q, %v", i, got.v, got.err)
		case resolved:
			taken++
		default:
			cancelled++
		}
	}
	t.Logf("%d replies taken, %d asks cancelled first", taken, cancelled)
}

// Hollywood's inbox doubles when full, turning overload into memory
// growth. A definition that sets no mailbox option gets a bounded one
// (DefaultMailbox, refusing beyond it): the message past the bound fails
// at once with ErrMailboxFull, and the refusal is temporary.
func TestADefinitionWithoutOptionsHasABoundedMailbox(t *testing.T) {
	g, l := newGate(), &opLog{}
	def := gatedProbe("default-bound", g, l)
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	if err := ref.Tell(ctx, Note{Op: "block"}); err != nil {
		t.Fatal(err)
	}
	recv(t, g.entered, "the handler to block")
	for i := range actor.DefaultMailbox {
		if err := ref.Tell(ctx, Note{Op: fmt.Sprint(i)}); err != nil {
			close(g.open)
			t.Fatalf("tell %d of %d into a default mailbox with room: %v", i+1, actor.DefaultMailbox, err)
		}
	}
	err := ref.Tell(context.Background(), Note{Op: "overflow"})
	close(g.open)
	mustIs(t, err, actor.ErrMailboxFull)
	waitUntil(t, "the mailbox to drain", func() bool { return len(l.get()) >= actor.DefaultMailbox+1 })
	if _, err := actor.Ask(ctx, ref, Do{Op: "after"}); err != nil {
		t.Fatalf("an ask once the mailbox drained: %v, want the refusal to have been temporary", err)
	}
}
