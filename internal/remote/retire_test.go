package remote

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// A retired member relays nothing: an ask that would cross it to the
// owner is refused, so that the asker, which may read the retirement
// first, never has it run twice.
func TestARetiredMemberRelaysNoAsk(t *testing.T) {
	_, ns, eps, atB, _ := silentLinkNodes(t)
	a, b, c := ns[0], ns[1], ns[2]
	now := time.Now()
	eps[0].set(b.id, now.Add(-2*time.Second))
	eps[0].set(c.id, now)
	a.r.markSilent(now, time.Second)
	if !a.r.isSilent(b.id) {
		t.Fatal("expected a to count its link to b silent")
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	if err := c.r.Retire(ctx); err != nil {
		t.Fatal(err)
	}
	// a's view still names c: the ask goes to c, which refuses it, and
	// fails once a has asked too often (the link to b stays cut).
	actx, acancel := context.WithTimeout(ctx, 2*time.Second)
	defer acancel()
	if got, err := actor.Ask(actx, counter.Ref(a, atB), incr{}); err == nil {
		t.Fatalf("an ask relayed by a retired member ran: %d", got)
	}
	if n, err := actor.Ask(ctx, counter.Ref(b, atB), get{}); err != nil || n != 0 {
		t.Fatalf("b counted %d (%v): a retired member relayed the ask", n, err)
	}
}

// A ReadOnly ask waiting on a member that left in order is placed again
// at once, whether or not an unsafe ask to the same member started the
// wait for its retirement (in one view change or the next).
func TestAReadOnlyAskDoesNotWaitForARetirement(t *testing.T) {
	for range 4 { // the pending asks are looked at in map order
		a, b, l, key := leaverOwns(t)
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		unsafe := async(func() (int, error) { return actor.Ask(ctx, counter.Ref(a, key), incr{}) })
		read := async(func() (string, error) { return actor.Ask(ctx, counter.Ref(a, key), whoAsks{}) })
		pollUntil(t, "both asks to wait on l", func() bool { return a.r.waiting() == 2 })
		a.r.Update(a.id, true, leftView([]*testNode{a, b}, l))
		select {
		case got := <-read:
			if got.err != nil {
				t.Fatalf("a ReadOnly ask whose owner left: %v, want it answered by b", got.err)
			}
		case got := <-unsafe:
			t.Fatalf("the unsafe ask ended (%v) before the ReadOnly one: that one waited for the retirement grace", got.err)
		}
		if got := <-unsafe; !errors.Is(got.err, actor.ErrOutcomeUnknown) {
			t.Fatalf("the unsafe ask whose owner left without retiring: %v, want ErrOutcomeUnknown", got.err)
		}
		cancel()
	}
}
