package replicanode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// byteCountingEndpoint counts the bytes a node posts on its endpoint.
type byteCountingEndpoint struct {
	transport.Endpoint
	bytes *atomic.Int64
}

func (e byteCountingEndpoint) Post(to ring.NodeID, st transport.StreamID, key uint64, payload []byte) error {
	e.bytes.Add(int64(len(payload)))
	return e.Endpoint.Post(to, st, key, payload)
}

// seededValue returns n bytes drawn from a generator seeded with seed.
func seededValue(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	return v
}

// A one-byte change of a 64 KiB state costs a small fraction of the state
// on the network when deltas are on (the default), and twice the state
// (one copy per other replica) when they are off; either way the next
// owner reads the new state byte for byte.
func TestALargeStateWithAOneByteChangeCrossesAsADelta(t *testing.T) {
	const size = 64 << 10
	for _, tc := range []struct {
		name     string
		deltaMin int
	}{{"on", 0}, {"off", -1}} {
		t.Run("deltas="+tc.name, func(t *testing.T) {
			var sent atomic.Int64
			// Ticks by hand: nothing is sent again behind the test's back.
			c := &testCluster{t: t, net: transport.NewMemNetwork(), manual: true}
			c.wrap = func(_ *member, ep transport.Endpoint) transport.Endpoint {
				return byteCountingEndpoint{Endpoint: ep, bytes: &sent}
			}
			c.configure = func(cfg *Config) { cfg.DeltaMin = tc.deltaMin }
			for i := range 3 {
				c.members = append(c.members, &member{addr: fmt.Sprintf("n%d", i), store: replicastore.NewMemory()})
			}
			for _, m := range c.members {
				c.start(m)
			}
			t.Cleanup(c.stopAll)
			ctx := bounded(t)
			k := key("large")
			owner, next := c.members[0], c.members[1]
			// At All a write returns once every replica holds it: each is
			// known to hold the base of the next.
			if err := owner.node.Acquire(ctx, k, c.ids(), replication.All); err != nil {
				t.Fatal(err)
			}
			v := seededValue(size, 1)
			if err := owner.node.Write(ctx, k, stateSlot, v); err != nil {
				t.Fatal(err)
			}
			v = bytes.Clone(v)
			v[size/2]++
			sent.Store(0)
			if err := owner.node.Write(ctx, k, stateSlot, v); err != nil {
				t.Fatal(err)
			}
			got := sent.Load()
			t.Logf("a one-byte change of a %d-byte state with deltas %s: %d bytes posted", size, tc.name, got)
			if tc.deltaMin >= 0 && got > size/32 {
				t.Fatalf("with deltas on the write posted %d bytes, want at most %d (1/32 of the state)", got, size/32)
			}
			if tc.deltaMin < 0 && got < 2*size {
				t.Fatalf("with deltas off the write posted %d bytes, want the state to each of two replicas (%d)", got, 2*size)
			}
			c.stop(owner)
			if err := next.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
				t.Fatal(err)
			}
			view, err := next.node.Read(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if r := view[stateSlot]; !bytes.Equal(r.Value, v) {
				t.Fatalf("the next owner read %d bytes that differ from the %d written", len(r.Value), len(v))
			}
		})
	}
}
