package replicanode

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
)

// holdingEndpoint is an endpoint that holds (transport.Holder): it counts
// the holds open, taken and released.
type holdingEndpoint struct {
	transport.Endpoint
	open, taken, released atomic.Int64
}

func (e *holdingEndpoint) Hold() func() {
	e.taken.Add(1)
	e.open.Add(1)
	return func() {
		e.open.Add(-1)
		e.released.Add(1)
	}
}

// The loop answers a batch's writes under a hold of its endpoint, so
// that the replies they release leave together, and releases every hold
// it takes.
func TestTheAnswersOfABatchAreGivenUnderAHold(t *testing.T) {
	he := &holdingEndpoint{}
	c := &testCluster{t: t, net: transport.NewMemNetwork()}
	c.wrap = func(m *member, ep transport.Endpoint) transport.Endpoint {
		if m != c.members[0] {
			return ep
		}
		he.Endpoint = ep
		return he
	}
	for i := range 3 {
		c.members = append(c.members, &member{addr: fmt.Sprintf("n%d", i), store: replicastore.NewMemory()})
	}
	for _, m := range c.members {
		c.start(m)
	}
	ctx := bounded(t)
	k := key("a")
	owner := c.members[0]
	if err := owner.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	const writes = 8
	var unheld atomic.Int64
	results := make([]*asyncResult, writes)
	for i := range results {
		r := newAsyncResult()
		results[i] = r
		done := func(err error) {
			if he.open.Load() == 0 {
				unheld.Add(1)
			}
			r.done(err)
		}
		if err := owner.node.WriteAsync(k, stateSlot, []byte{byte(i)}, done); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range results {
		if err := r.wait(t); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if n := unheld.Load(); n > 0 {
		t.Fatalf("%d of %d writes were answered with no hold open, want every answer under the batch's hold", n, writes)
	}
	c.stopAll()
	if taken, released := he.taken.Load(), he.released.Load(); taken == 0 || taken != released {
		t.Fatalf("the loop took %d holds and released %d, want as many released as taken, at least one", taken, released)
	}
}
