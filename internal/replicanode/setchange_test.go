package replicanode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/replication"
)

// When a key's replica set moves from {A,B,C} to {D,A,B} while C lives
// and still serves the key, an acquisition by D that names the previous
// set fences C even though each could reach a quorum of its own set
// alone ({B,C} and {D,A}), and adopts what C had acknowledged.
func TestAnAcquisitionFromThePreviousSetFencesItsOwner(t *testing.T) {
	c := newCluster(t, 4, false)
	ctx := bounded(t)
	k := key("a")
	a, b, old, d := c.members[0], c.members[1], c.members[2], c.members[3]
	previous := c.ids(a, b, old)
	if err := old.node.Acquire(ctx, k, previous, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := old.node.Write(ctx, k, stateSlot, []byte("before")); err != nil {
		t.Fatal(err)
	}
	c.net.Partition(old.addr, a.addr)
	c.net.Partition(d.addr, b.addr)
	if err := d.node.AcquireFrom(ctx, k, c.ids(d, a, b), previous, replication.Majority); err != nil {
		t.Fatalf("the joint acquisition with {D,A} and {A,C} reachable returned %v", err)
	}
	if got, err := readState(ctx, d, k); err != nil || got != "before" {
		t.Fatalf("the new owner read %q, %v; want what the previous set acknowledged", got, err)
	}
	var stale *StaleOwnerError
	if err := old.node.Write(ctx, k, stateSlot, []byte("after")); !errors.As(err, &stale) {
		t.Fatalf("the previous set's owner wrote with %v, want a *StaleOwnerError", err)
	}
	if err := d.node.Write(ctx, k, stateSlot, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, err := readState(ctx, d, k); err != nil || got != "new" {
		t.Fatalf("the new owner read %q, %v; want new", got, err)
	}
}

// A serves k over P={A,B,C}; the set moves to R={A,B,D} and A's
// AcquireFrom(k, R, P) must acquire jointly, not return because k is
// served. Once it returned, D may acquire over R alone: with A cut off
// from B and D, A must not get a write acknowledged by {A,C} while D
// serves.
func TestAcquireFromOnAKeyServedOverThePreviousSetAcquiresJointly(t *testing.T) {
	c := newCluster(t, 4, false)
	ctx := bounded(t)
	k := key("a")
	a, b, cc, d := c.members[0], c.members[1], c.members[2], c.members[3]
	P, R := c.ids(a, b, cc), c.ids(a, b, d)
	if err := a.node.Acquire(ctx, k, P, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := a.node.Write(ctx, k, stateSlot, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	if err := a.node.AcquireFrom(ctx, k, R, P, replication.Majority); err != nil {
		t.Fatal(err)
	}
	c.net.Partition(a.addr, b.addr)
	c.net.Partition(a.addr, d.addr)
	// D may not have heard of A's joint epoch yet (the partition holds
	// A's prepare): B's refusal then tells it, and D acquires again
	// above it, as a caller does after a *StaleOwnerError.
	err := d.node.Acquire(ctx, k, R, replication.Majority)
	var stale *StaleOwnerError
	if errors.As(err, &stale) {
		err = d.node.Acquire(ctx, k, R, replication.Majority)
	}
	if err != nil {
		t.Fatalf("D's acquisition over R with {B,D}: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := a.node.Write(wctx, k, stateSlot, []byte("v1")); err == nil {
		t.Fatal("two owners: A's write was acknowledged while D serves over R")
	}
	if got, err := readState(ctx, d, k); err != nil || got != "v0" {
		t.Fatalf("D read %q, %v; want v0", got, err)
	}
}
