package replica

import (
	"testing"

	"github.com/troupe-go/troupe/replication"
)

// TestASweepThatGivesUpLeavesTheOwnersTombstones collects a deleted key
// while one replica stops answering after it stored the tombstone again:
// the other replica forgets the key, the owner's own replica is told
// last and so keeps the tombstone when the sweep gives up (its member
// finds the key again), and a later sweep with every replica answering
// collects the key everywhere.
func TestASweepThatGivesUpLeavesTheOwnersTombstones(t *testing.T) {
	k := Key{Type: "reg", ID: "a"}
	s := newSim(t, 3, replication.Majority, []Key{k})
	state := Slot{Kind: KindState}
	owner, other, silent := s.node(s.replicas[k][0]), s.node(s.replicas[k][1]), s.node(s.replicas[k][2])
	s.acquire(owner, k)
	s.settle()
	for _, tomb := range []bool{false, true} {
		tk, err := owner.core.Write(k, state, []byte{1}, tomb)
		if err != nil {
			t.Fatal(err)
		}
		owner.abandoned[tk] = true // no client waits on it
		s.apply(owner)
		s.settle()
	}
	all := func(Record) bool { return true }
	if !owner.core.SweepKey(k, all) {
		t.Fatal("a key holding one tombstone is not collectable")
	}
	s.apply(owner)
	// Everything is delivered, but forgets to the silent replica.
	for range 400 {
		for i := 0; i < len(s.net); {
			if m := s.net[i]; m.To == silent.id && m.Type == MsgForget {
				s.net = append(s.net[:i], s.net[i+1:]...)
				continue
			}
			s.deliver(i, false)
		}
		if !owner.core.Sweeping(k) {
			break
		}
		s.tick(owner)
	}
	if owner.core.Sweeping(k) || !owner.core.SweepGaveUp(k) {
		t.Fatalf("sweeping %v, gave up %v; want a sweep that gave up", owner.core.Sweeping(k), owner.core.SweepGaveUp(k))
	}
	rk := recordKey{k, state}
	if _, ok := other.stored[rk]; ok {
		t.Fatalf("%s, which answered the forget, still stores the tombstone", other.id)
	}
	for _, n := range []*simNode{owner, silent} {
		if r, ok := n.stored[rk]; !ok || !r.Tombstone {
			t.Fatalf("%s stores %+v, %v after the sweep gave up; want the tombstone", n.id, r, ok)
		}
	}
	if owner.core.Empty(k) {
		t.Fatal("the owner's view is empty after a sweep that gave up")
	}
	if !owner.core.SweepKey(k, all) {
		t.Fatal("the key is not collectable again")
	}
	s.apply(owner)
	s.settle()
	for _, n := range s.nodes {
		if r, ok := n.stored[rk]; ok {
			t.Fatalf("%s still stores %+v after a sweep every replica answered", n.id, r)
		}
		if h, ok := HorizonOf(n.stored[recordKey{k, Slot{Kind: KindPromise}}]); !ok || h.Epoch != owner.core.owned[k].epoch {
			t.Fatalf("%s's horizon is %+v (%v), want one at the owner's epoch", n.id, h, ok)
		}
	}
	if !owner.core.Empty(k) || owner.core.SweepGaveUp(k) {
		t.Fatalf("empty %v, gave up %v after the collection; want empty, not given up", owner.core.Empty(k), owner.core.SweepGaveUp(k))
	}
}
