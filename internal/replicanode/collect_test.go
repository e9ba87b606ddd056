package replicanode

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
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
	if collected, err := a.node.Collect(ctx, k, time.Now()); !errors.Is(err, ErrSweepGaveUp) || collected {
		t.Fatalf("collecting while a replica is cut off: %v, %v; want false, ErrSweepGaveUp", collected, err)
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

// TestCollectableListsTombstonedKeysRoundTheRing lists the keys whose
// records are all old enough tombstones (or lie under the key's horizon),
// that the filter accepts, a few at a time, resuming where the last call
// stopped.
func TestCollectableListsTombstonedKeysRoundTheRing(t *testing.T) {
	c := newCluster(t, 1, false)
	ctx := bounded(t)
	m := c.members[0]
	e := replica.Epoch{Term: 3, Node: m.node.Self()}
	old := time.Now().Add(-time.Hour)
	dated := func(at time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(at.UnixMilli())) }
	tomb := func(id string, at time.Time) replica.Record {
		return replica.Record{Key: key(id), Kind: replica.KindState, Epoch: e, Version: 2, Tombstone: true, Value: dated(at)}
	}
	recs := []replica.Record{
		tomb("t1", old), tomb("t2", old), tomb("t3", old), tomb("skip", old),
		tomb("young", time.Now()),
		{Key: key("live"), Kind: replica.KindState, Epoch: e, Version: 1, Value: []byte("v")},
		// A live record under the key's horizon is void: the key holds
		// only its tombstone.
		replica.PromiseRecord(key("void"), e, replica.Horizon{Epoch: e, Version: 1}),
		{Key: key("void"), Kind: replica.KindState, Epoch: e, Version: 1, Value: []byte("v")},
		{Key: key("void"), Kind: replica.KindContinuity, Name: "r", Epoch: e, Version: 2, Tombstone: true},
	}
	if err := m.store.Put(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	want := func(k replica.Key) bool { return k.ID != "skip" }
	before := time.Now().Add(-time.Minute)
	seen := map[string]int{}
	var cursor ring.Token
	for range 4 {
		keys, next, err := m.node.Collectable(ctx, cursor, before, 2, want)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 2 {
			t.Fatalf("a call with limit 2 listed %v", keys)
		}
		for _, k := range keys {
			seen[k.ID]++
		}
		cursor = next
	}
	for _, id := range []string{"t1", "t2", "t3", "void"} {
		if seen[id] == 0 {
			t.Errorf("%s was never listed (%v)", id, seen)
		}
	}
	for _, id := range []string{"skip", "young", "live"} {
		if seen[id] != 0 {
			t.Errorf("%s was listed (%v)", id, seen)
		}
	}
}
