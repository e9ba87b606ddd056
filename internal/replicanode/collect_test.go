package replicanode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
)

// TestACollectedKeyIsGoneFromEveryReplicaAndStaysGone collects a deleted
// key: not while a replica is cut off (every replica must store the
// tombstones again), then once it is back, when every store holds only
// the key's promise with its horizon. A replica that then comes back
// with the value the delete replaced (a store that lost the delete and
// the collection) does not bring it back: the horizon voids it.
func TestACollectedKeyIsGoneFromEveryReplicaAndStaysGone(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	k := key("gone")
	a, b, cm := c.members[0], c.members[1], c.members[2]
	set := c.ids()
	if err := a.node.Acquire(ctx, k, set, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := a.node.Write(ctx, k, stateSlot, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if collected, err := a.node.Collect(ctx, k, time.Now()); err != nil || collected {
		t.Fatalf("collecting a key with a live record: %v, %v; want false, nil", collected, err)
	}
	stale := waitStored(ctx, t, cm, k)
	c.isolate(cm)
	deleted := time.Now()
	if err := a.node.Delete(ctx, k, stateSlot); err != nil {
		t.Fatal(err)
	}
	if collected, err := a.node.Collect(ctx, k, deleted.Add(-time.Hour)); err != nil || collected {
		t.Fatalf("collecting a tombstone younger than asked: %v, %v; want false, nil", collected, err)
	}
	if collected, err := a.node.Collect(ctx, k, time.Now()); err != nil || collected {
		t.Fatalf("collecting while a replica is cut off: %v, %v; want false, nil", collected, err)
	}
	for _, m := range []*member{a, b} {
		if r, ok, err := m.store.Get(ctx, k, stateSlot); err != nil || !ok || !r.Tombstone {
			t.Fatalf("%s holds %+v, %v, %v after a collection that could not end; want the tombstone", m.addr, r, ok, err)
		}
		if at, ok := DeletedAt(mustGet(ctx, t, m, k)); !ok || at.Before(deleted.Add(-time.Second)) || at.After(time.Now()) {
			t.Fatalf("%s's tombstone is dated %v (%v), want about %v", m.addr, at, ok, deleted)
		}
	}
	c.heal(cm)
	if collected, err := a.node.Collect(ctx, k, time.Now()); err != nil || !collected {
		t.Fatalf("collecting with every replica back: %v, %v; want true, nil", collected, err)
	}
	for _, m := range c.members {
		if r, ok, err := m.store.Get(ctx, k, stateSlot); err != nil || ok {
			t.Fatalf("%s still stores %+v, %v after the collection", m.addr, r, err)
		}
		p, ok, err := m.store.Get(ctx, k, replica.Slot{Kind: replica.KindPromise})
		if err != nil || !ok {
			t.Fatalf("%s lost the key's promise: %v, %v", m.addr, ok, err)
		}
		if h, ok := replica.HorizonOf(p); !ok || !h.Covers(stale) {
			t.Fatalf("%s's horizon %+v (%v) does not cover the value the delete replaced", m.addr, h, ok)
		}
	}
	view, err := a.node.Read(ctx, k)
	if err != nil || len(view) != 0 {
		t.Fatalf("the owner reads %+v, %v after the collection; want nothing", view, err)
	}

	// cm comes back with the replaced value and no horizon, as a store
	// that lost its last writes would; a is cut off, so a quorum of the
	// new owner b must include cm.
	c.crash(cm)
	if err := cm.store.Put(ctx, replica.PromiseRecord(k, replica.Epoch{}, replica.Horizon{}), stale); err != nil {
		t.Fatal(err)
	}
	c.start(cm)
	c.isolate(a)
	if err := b.node.Acquire(ctx, k, c.ids(), replication.Majority); err != nil {
		t.Fatal(err)
	}
	if view, err := b.node.Read(ctx, k); err != nil || len(view) != 0 {
		t.Fatalf("the next owner reads %+v, %v; want nothing (the stale value is void)", view, err)
	}
	if err := b.node.Write(ctx, k, stateSlot, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if got, err := readState(ctx, b, k); err != nil || got != "v2" {
		t.Fatalf("a write after the collection reads %q, %v; want v2", got, err)
	}
	if _, err := c.nodeOf(cm).Collect(ctx, k, time.Now()); !errors.Is(err, replica.ErrNotServing) {
		t.Fatalf("collecting a key not served here: %v, want ErrNotServing", err)
	}
}

// waitStored returns the state record of k m's store holds, once it
// holds one.
func waitStored(ctx context.Context, t *testing.T, m *member, k replica.Key) replica.Record {
	t.Helper()
	for {
		if r, ok, err := m.store.Get(ctx, k, stateSlot); err != nil || ok {
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never stored %v", m.addr, k)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func mustGet(ctx context.Context, t *testing.T, m *member, k replica.Key) replica.Record {
	t.Helper()
	r, _, err := m.store.Get(ctx, k, stateSlot)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
