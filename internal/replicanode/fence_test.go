package replicanode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// keyRange returns a range holding k's token and no other.
func keyRange(k replica.Key) ring.Range {
	t := k.Token()
	return ring.Range{Start: t - 1, End: t}
}

// The reviewer's schedule where views disagree (five nodes a, b, c, x,
// d; three replicas at Majority): P={a,b,c}, then R1={x,a,c}, then
// R2={x,c,d}. a owns k on P and wrote v1. x receives k's range and
// copies it from b and c while a is cut off from x; then, cut off from
// c too, a (whose view still shows P) writes v2, which {a,b} would
// acknowledge; a resigns. d receives the range and copies it from x and
// c; a joint acquisition from R1 to R2 then reads k. Either a's write
// fails (the copy fenced the range at b) or the acquisition reads it:
// an acknowledged v2 must not be lost.
func TestACopyFencesAnOwnerOfThePreviousSetWhoseViewLags(t *testing.T) {
	l := newLaggingOwner(t)
	wctx, cancel := context.WithTimeout(l.ctx, 500*time.Millisecond)
	defer cancel()
	werr := l.a.node.Write(wctx, l.k, stateSlot, []byte("v2"))
	if err := l.a.node.Resign(l.k); err != nil {
		t.Fatal(err)
	}
	got := l.moveOnToR2(t)
	if werr == nil && got != "v2" {
		t.Fatalf("a's write of v2 was acknowledged, then the owner on R2 read %q: an acknowledged write was lost", got)
	}
	if werr != nil && got != "v1" && got != "v2" {
		t.Fatalf("a's write of v2 failed (%v) and the owner on R2 read %q, want v1 or v2", werr, got)
	}
	t.Logf("a's write of v2: %v; the owner on R2 read %q", werr, got)
}

// A source records its floor in its store before it answers the fence:
// once CopyFenced returned, the fenced sources' stores hold it (Open
// restores it, as the core's TestFloorsAreRestored checks).
func TestAFencedSourceRecordsItsFloorBeforeItAnswers(t *testing.T) {
	c := newCluster(t, 4, false)
	ctx := bounded(t)
	k := key("floored")
	rng := keyRange(k)
	a, b, cc, x := c.members[0], c.members[1], c.members[2], c.members[3]
	ownThenFence(t, ctx, c, a, x, c.ids(a, b, cc), k)
	for _, m := range []*member{b, cc} {
		floors, err := m.store.Floors(ctx)
		if err != nil || len(floors) != 1 || !floors[0].Range.Contains(k.Token()) || floors[0].Epoch.Node != c.ids(x)[0] {
			t.Fatalf("%s's store holds floors %v, %v once the copy returned; want one over %v by x", m.addr, floors, err, rng)
		}
	}
}

// A source that still receives part of the range does not count as
// fenced: with too few others, CopyFenced fails with ErrSourceReceiving.
func TestCopyFencedNeedsSourcesThatCount(t *testing.T) {
	c := newCluster(t, 3, false)
	ctx := bounded(t)
	k := key("r")
	rng := keyRange(k)
	a, b, x := c.members[0], c.members[1], c.members[2]
	if err := b.node.SetReceiving(rng); err != nil {
		t.Fatal(err)
	}
	if err := x.node.CopyFenced(ctx, rng, c.ids(a, b), 2, nil); !errors.Is(err, ErrSourceReceiving) {
		t.Fatalf("a fenced copy with a receiving source of two needed returned %v, want ErrSourceReceiving", err)
	}
	if floors, _ := b.store.Floors(ctx); len(floors) != 0 {
		t.Fatalf("the receiving source raised floors %v", floors)
	}
}

// laggingOwner is the reviewer's schedule up to a's first write after
// the fence: 5 members a,b,c,x,d, replicas 3 at Majority; a owns k on
// P={a,b,c} and wrote v1; x copied the range from b and c (fenced) while
// a was cut off from it; a is now cut off from c too, its view still
// showing P. The next sets are R1={x,a,c} and R2={x,c,d}.
type laggingOwner struct {
	c           *testCluster
	ctx         context.Context
	k           replica.Key
	rng         ring.Range
	a, x, cc, d *member
	P, R1, R2   []ring.NodeID
}

// ownThenFence has a acquire k over P and write v1 there; then x, cut
// off from a, fences k's range at P for the departure of departed and
// copies it from two of them (the others than a), staying receiving.
func ownThenFence(t *testing.T, ctx context.Context, c *testCluster, a, x *member, P []ring.NodeID, k replica.Key, departed ...ring.NodeID) {
	t.Helper()
	if err := a.node.Acquire(ctx, k, P, replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := a.node.Write(ctx, k, stateSlot, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	c.net.Partition(a.addr, x.addr)
	rng := keyRange(k)
	if err := x.node.SetReceiving(rng); err != nil {
		t.Fatal(err)
	}
	if err := x.node.CopyFenced(ctx, rng, P, 2, departed); err != nil {
		t.Fatalf("x's fenced copy from P: %v", err)
	}
}

func newLaggingOwner(t *testing.T) *laggingOwner {
	t.Helper()
	c := newCluster(t, 5, false)
	l := &laggingOwner{c: c, ctx: bounded(t), k: key("lagging")}
	l.rng = keyRange(l.k)
	a, b, cc, x, d := c.members[0], c.members[1], c.members[2], c.members[3], c.members[4]
	l.a, l.x, l.cc, l.d = a, x, cc, d
	l.P, l.R1, l.R2 = c.ids(a, b, cc), c.ids(x, a, cc), c.ids(x, cc, d)
	ownThenFence(t, l.ctx, c, a, x, l.P, l.k)
	if err := x.node.EndReceiving(l.ctx, l.rng); err != nil {
		t.Fatal(err)
	}
	c.net.Partition(a.addr, cc.addr)
	return l
}

// moveOnToR2 has d, cut off from a, receive the range from x and c
// (fenced), acquire k jointly from R1 to R2 and read it.
func (l *laggingOwner) moveOnToR2(t *testing.T) string {
	t.Helper()
	l.c.net.Partition(l.a.addr, l.d.addr)
	if err := l.d.node.SetReceiving(l.rng); err != nil {
		t.Fatal(err)
	}
	if err := l.d.node.CopyFenced(l.ctx, l.rng, l.R1, 2, nil); err != nil {
		t.Fatalf("d's copy from x and c: %v", err)
	}
	if err := l.d.node.EndReceiving(l.ctx, l.rng); err != nil {
		t.Fatal(err)
	}
	if err := l.d.node.AcquireFrom(l.ctx, l.k, l.R2, l.R1, replication.Majority); err != nil {
		t.Fatalf("the joint acquisition from R1 to R2: %v", err)
	}
	got, err := readState(l.ctx, l.d, l.k)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
