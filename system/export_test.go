package system

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/ring"
)

// OwnerOf returns the address of the member s believes serves typ/key.
func OwnerOf(s *System, typ, key string) string {
	id, _, err := s.m.router.Dest(typ, key, uint64(ring.KeyToken(typ, key)))
	if err != nil {
		return "error: " + err.Error()
	}
	return id.Addr
}

// RingOwnerOf returns the address of key's first replica on s's ring of
// typ: where the key lives once what moved has settled (OwnerOf follows
// the router, which keeps a moving key on its old owner while that one
// still runs it).
func RingOwnerOf(s *System, typ, key string) string {
	r := s.m.router.Ring(typ)
	if r == nil {
		return "no ring of " + typ
	}
	return r.AppendReplicas(nil, ring.KeyToken(typ, key), 1)[0].Addr
}

// ForceRejoin makes a clustered s rejoin with a new incarnation, as if the
// cluster had removed it.
func ForceRejoin(s *System) {
	select {
	case s.m.force <- struct{}{}:
	default:
	}
}

// HandoffOpen reports whether s, a member, may still hold messages to its
// own keys (a hand-off window is open, or a key is held): until it does
// not, they may go through its router rather than in process.
func HandoffOpen(s *System) bool { return s.m.router.HandoffOpen() }

// ReplicasOf returns the addresses of the n replicas of typ/key as s
// places them, in ring order (the first is the owner while it is up).
func ReplicasOf(s *System, typ, key string, n int) []string {
	ids, err := s.m.router.Replicas(nil, typ, uint64(ring.KeyToken(typ, key)), n)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	addrs := make([]string, len(ids))
	for i, id := range ids {
		addrs[i] = id.Addr
	}
	return addrs
}

// KeptUsage returns the answers and bytes s's ledger of kept answers
// counts.
func KeptUsage(s *System) (answers int, bytes int64) { return s.h.KeptUsage() }

// StoredKept returns the kept answers and pending requests of typ/key's
// record in s's local store (none without a record), read without
// acquiring the key.
func StoredKept(ctx context.Context, s *System, typ, key string) (answers, pending int, err error) {
	r, ok, err := s.st.store.Get(ctx, replica.Key{Type: typ, ID: key}, stateSlot)
	if err != nil || !ok || r.Tombstone {
		return 0, 0, err
	}
	return runtime.KeptIn(s.h, r.Value)
}

// StoredPages returns how many pages of kept answers (continuity
// records "kept.0" to "kept.63" that are not tombstones) s's local store
// holds for typ/key.
func StoredPages(ctx context.Context, s *System, typ, key string) (int, error) {
	n := 0
	for i := range 64 {
		r, ok, err := s.st.store.Get(ctx, replica.Key{Type: typ, ID: key}, replica.Slot{Kind: replica.KindContinuity, Name: "kept." + strconv.Itoa(i)})
		if err != nil {
			return 0, err
		}
		if ok && !r.Tombstone {
			n++
		}
	}
	return n, nil
}

// Stored reports whether s's local store holds a record (not a
// tombstone) for typ/key's state.
func Stored(ctx context.Context, s *System, typ, key string) (bool, error) {
	r, ok, err := s.st.store.Get(ctx, replica.Key{Type: typ, ID: key}, stateSlot)
	return ok && !r.Tombstone, err
}

// PruneKeptAt asks s's runtime of typ, as s's ledger of kept answers
// does, to prune key's kept answers dated before before.
func PruneKeptAt(s *System, typ, key string, before int64) {
	s.h.Kind(typ).(interface{ PruneKept(string, int64) }).PruneKept(key, before)
}

// ActivatedAt returns how many keys s activated since it started.
func ActivatedAt(s *System) uint64 { return s.h.Activated.Load() }

// CollectPass runs one pass of s's collector of tombstones, for the
// tombstones deleted before before, from the ring token after cursor: it
// returns the keys it tried to collect and whether it ended at a sweep
// that gave up.
func CollectPass(ctx context.Context, s *System, cursor uint64, before time.Time) (tried int, gaveUp bool) {
	n, err := s.st.current()
	if err != nil {
		return 0, false
	}
	p := s.st.collectPass(ctx, n, ring.Token(cursor), before)
	return p.tried, p.gaveUp
}

// Collected returns how many keys s's collector collected.
func Collected(s *System) uint64 { return s.st.collected.Load() }

// ReceiveAll has s's replication node receive the whole ring (its
// answers stop counting) until the returned func ends it.
func ReceiveAll(t testing.TB, s *System) (end func()) {
	n, err := s.st.current()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.SetReceiving(ring.Range{}); err != nil {
		t.Fatal(err)
	}
	// SetReceiving queues the change: wait until the node made it.
	for deadline := time.Now().Add(10 * time.Second); len(n.Receiving()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node did not start receiving")
		}
	}
	return func() {
		if err := n.EndReceiving(context.Background(), ring.Range{}); err != nil {
			t.Fatal(err)
		}
	}
}

// NodeIDOf returns the identity s, a member, has in the rings (its
// address and process incarnation).
func NodeIDOf(s *System) ring.NodeID {
	node, err := s.m.st.current()
	if err != nil {
		return ring.NodeID{}
	}
	return node.Self()
}

// FloorsOf returns the floors s, a member, holds in its store.
func FloorsOf(t testing.TB, s *System) []replica.Floor {
	t.Helper()
	fs, err := s.m.st.store.Floors(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fs
}
