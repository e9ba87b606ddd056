package replicanode

import (
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// A leaving member waits (system's handOver) until Serving reports no
// catch-up open. A catch-up that completed from other sources stops
// asking this one mid-range: its session must stop counting soon, or
// the leaving member would hold its Close for the whole leave timeout
// though nobody reads from it any more.
func TestASourceLeftBehindByACompletedCatchUpIsNotServingIt(t *testing.T) {
	eps := benchEndpoints(t, "mem")
	ctx := bounded(t)
	nodes := make([]*Node, len(eps))
	for i, ep := range eps {
		chunk := 1 << 20
		if i == 0 {
			chunk = 512 // the slow source: many chunks
		}
		n, err := Open(ctx, Config{Endpoint: ep, Store: replicastore.NewMemory(), Joining: i == 2, SyncChunk: chunk, TickEvery: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close(ctx)
		nodes[i] = n
	}
	ids := []ring.NodeID{eps[0].Self(), eps[1].Self(), eps[2].Self()}
	for i := range 60 {
		k := key(fmt.Sprint(i))
		if err := nodes[0].Acquire(ctx, k, ids, replication.Majority); err != nil {
			t.Fatal(err)
		}
		if err := nodes[0].Write(ctx, k, stateSlot, []byte(fmt.Sprintf("value-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// One of the two suffices (n-q+1 of a previous set of two).
	if err := nodes[2].CatchUp(ctx, ring.Range{}, ids[:2], 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		open, _ := nodes[0].Serving()
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after the catch-up ended, the source it stopped asking still reports %d catch-up open", open)
		}
		time.Sleep(20 * time.Millisecond) // poll
	}
}
