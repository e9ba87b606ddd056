package transport

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// A sender waiting on a receipt does not wait out the peer's grant delay:
// with the delay an hour long, receipts waited on still resolve, whether
// the envelope was written before the wait began or after, on the
// application stream (delivered by the reader) and on the replication
// stream (delivered by its own goroutine, here after the ping arrived).
func TestWaitedReceiptsDoNotWaitForTheGrantDelay(t *testing.T) {
	tune := func(tn *tuning) { tn.grantDelay = time.Hour }
	a, b := newTunedNode(t, tune, nil), newTunedNode(t, tune, nil)
	started, release := make(chan struct{}, 1), make(chan struct{})
	b.t.Handle(StreamReplication, HandlerFunc(func(ring.NodeID, []byte) {
		select {
		case started <- struct{}{}:
			<-release // only the first envelope blocks
		default:
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	send := func(st StreamID, n int) *Receipt {
		t.Helper()
		var last *Receipt
		for range n {
			r, err := a.t.Send(context.Background(), b.t.Self(), st, 0, make([]byte, 100))
			if err != nil {
				t.Fatal(err)
			}
			last = r
		}
		return last
	}
	for _, n := range []int{1, 100, 1000} {
		if err := send(StreamApplication, n).Wait(ctx); err != nil {
			t.Fatalf("application stream, %d envelopes: %v", n, err)
		}
	}

	// The first replication envelope's handler holds until b has seen
	// the ping that waiting on its receipt sends.
	r := send(StreamReplication, 1)
	<-started
	done := r.Done()
	b.waitFor(t, "the ping", func() bool {
		s := onlySession(t, b)
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.ackAsked[StreamReplication]
	})
	close(release)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("a receipt waited on before its envelope was consumed did not resolve")
	}
	if err := send(StreamReplication, 100).Wait(ctx); err != nil {
		t.Fatalf("replication stream: %v", err)
	}
}

// onlySession returns n's only session.
func onlySession(t *testing.T, n *testNode) *session {
	t.Helper()
	n.t.mu.Lock()
	defer n.t.mu.Unlock()
	for _, s := range n.t.sessions {
		return s
	}
	t.Fatal("no session")
	return nil
}
