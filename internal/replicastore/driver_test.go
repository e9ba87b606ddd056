package replicastore

import (
	"context"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// TestAReplicaRestartsFromItsStore drives a one-node core the way the
// runtime will: persist each Ready before anything else, and on restart
// give the new core everything the store holds. The restarted node keeps
// its promise (its next epoch is higher) and its state.
func TestAReplicaRestartsFromItsStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	self := ring.NodeID{Addr: "a", Incarnation: 1}
	key := replica.Key{Type: "counter", ID: "x"}

	s, err := Open(dir, Options{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	persist := func(c *replica.Core) replica.Ready {
		rd := c.Ready()
		if err := s.Put(ctx, rd.Persist...); err != nil {
			t.Fatal(err)
		}
		return rd
	}
	c := replica.New(self, replica.Counting)
	if err := c.Acquire(key, []ring.NodeID{self}, replication.Majority); err != nil {
		t.Fatal(err)
	}
	persist(c)
	first := c.Promised(key)
	tk, err := c.Write(key, replica.Slot{Kind: replica.KindState}, []byte("seven"), false)
	if err != nil {
		t.Fatal(err)
	}
	if rd := persist(c); len(rd.Done) != 1 || rd.Done[0] != tk {
		t.Fatalf("a single-replica write was not done at once: %+v", rd)
	}
	_ = s.Close()

	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c = replica.New(self, replica.Counting)
	var recs []replica.Record
	if err := s.Range(ctx, ring.Range{}, func(r replica.Record) bool { recs = append(recs, r); return true }); err != nil {
		t.Fatal(err)
	}
	c.Restore(recs...)
	if got := c.Promised(key); got != first {
		t.Fatalf("the restarted replica promised %v, want %v", got, first)
	}
	if err := c.Acquire(key, []ring.NodeID{self}, replication.Majority); err != nil {
		t.Fatal(err)
	}
	persist(c)
	if c.Promised(key).Compare(first) <= 0 {
		t.Fatalf("the epoch after restart %v is not above %v", c.Promised(key), first)
	}
	r, ok := c.Current(key, replica.Slot{Kind: replica.KindState})
	if !ok || string(r.Value) != "seven" {
		t.Fatalf("after restart the owner sees %+v, want seven", r)
	}
}
