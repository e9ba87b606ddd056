package remote

import (
	"context"
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
