package replicanode

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// copyFilter stands between a copier and its endpoint: it drops the
// fences it posts to unfenced and the catch-up requests it posts to
// mute, and counts the catch-up requests it posts to unfenced.
type copyFilter struct {
	transport.Endpoint
	t              *testing.T
	unfenced, mute string
	mu             sync.Mutex
	asked          int // catch-up requests posted to unfenced
}

func (e *copyFilter) Post(to ring.NodeID, st transport.StreamID, key uint64, payload []byte) error {
	msgs, err := appendEnvelopeMessages(nil, payload)
	if err != nil {
		e.t.Errorf("an envelope posted does not decode: %v", err)
		return err
	}
	var enc []byte
	var ends []int
	for _, m := range msgs {
		request := m.Type == replica.MsgSyncRequest || m.Type == replica.MsgSyncIndexRequest
		switch {
		case m.Type == replica.MsgFence && to.Addr == e.unfenced:
			continue
		case request && to.Addr == e.mute:
			continue
		case request && to.Addr == e.unfenced:
			e.mu.Lock()
			e.asked++
			e.mu.Unlock()
		}
		enc = replica.AppendEncode(enc, m)
		ends = append(ends, len(enc))
	}
	if len(ends) == 0 {
		return nil
	}
	return e.Endpoint.Post(to, st, key, appendEnvelope(e.Buffer(len(enc)+10*len(ends)+11), enc, ends))
}

// A fenced copy reads only from the sources it fenced: a copy from an
// unfenced source was read without the fence before it, so an owner of
// the previous set may still get writes acknowledged that it lacks. With
// a never fenced (its fences are lost) and c fenced but unable to answer
// the copy, the copy cannot complete from b alone, although a could have
// made up its quorum, and a is never asked.
func TestCopyFencedReadsOnlyFromTheSourcesItFenced(t *testing.T) {
	filter := &copyFilter{t: t}
	c := newWrappedCluster(t, 4, false, 3, func(ep transport.Endpoint) transport.Endpoint {
		filter.Endpoint = ep
		return filter
	})
	ctx := bounded(t)
	a, b, cc, x := c.members[0], c.members[1], c.members[2], c.members[3]
	filter.unfenced, filter.mute = a.addr, cc.addr
	k := key("fenced-only")
	rng := keyRange(k)
	if err := a.node.Acquire(ctx, k, c.ids(a, b, cc), replication.Majority); err != nil {
		t.Fatal(err)
	}
	if err := a.node.Write(ctx, k, stateSlot, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := x.node.SetReceiving(rng); err != nil {
		t.Fatal(err)
	}
	// Long enough for a copy from a and b to complete many times over.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := x.node.CopyFenced(cctx, rng, c.ids(a, b, cc), 2, nil)
	if err == nil {
		t.Fatal("the copy completed with b the only fenced source that answered: it counted a, which it did not fence")
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the copy returned %v, want ErrUnavailable", err)
	}
	filter.mu.Lock()
	asked := filter.asked
	filter.mu.Unlock()
	if asked != 0 {
		t.Fatalf("the copy asked a, which it did not fence, %d times", asked)
	}
}

// What the fence left open before acquisitions named the copiers their
// caller's view shows: the schedule of
// TestACopyFencesAnOwnerOfThePreviousSetWhoseViewLags, except that a,
// whose view still shows P, does what its runtime does after a write
// fails with a newer epoch: it acquires k again over P (no joint
// acquisition has served on R1, so the Stale views assumption allows
// it). Had it acquired above the floor, {a,b} would have acknowledged v3,
// which x never sees, and d's copy from {x,c} and the joint acquisition
// from R1={x,a,c} (a cut off from d) would have lost it. The floor names
// x, which a's view does not show: the acquisition fails, naming x, and
// writes nothing, and the owner on R2 reads v1.
func TestALaggingOwnerDoesNotAcquireAgainAboveTheFence(t *testing.T) {
	l := newLaggingOwner(t)
	// a's view still shows P: it acquires again, as its runtime would.
	stale := refusedAtTheFloor(t, l.ctx, l.a, l.k, l.P, AcquireOptions{})
	if stale.Newer.Node != l.x.node.Self() {
		t.Fatalf("a's acquisition again over P was refused by %v's floor, want x's", stale.Newer.Node)
	}
	if got := l.moveOnToR2(t); got != "v1" {
		t.Fatalf("the owner on R2 read %q, want v1", got)
	}
}

// A floor lives in its replica's store only, and a store is lost only
// with its process: the process that starts over an empty store is a new
// incarnation, and what is addressed to the one before it is dropped. So
// a fenced source that loses its store, catches up and counts again
// still answers nothing to an owner of the previous set that acquired
// before the fence: that owner finds no quorum of P without the other
// fenced source, and gets no write acknowledged.
func TestAFencedSourceThatLosesItsStoreStillFencesTheOwnerOfThePreviousSet(t *testing.T) {
	c := newCluster(t, 4, false)
	ctx := bounded(t)
	a, b, cc, x := c.members[0], c.members[1], c.members[2], c.members[3]
	k := key("wiped-source")
	rng := keyRange(k)
	P := c.ids(a, b, cc)
	ownThenFence(t, ctx, c, a, x, P, k)
	if err := x.node.EndReceiving(ctx, rng); err != nil {
		t.Fatal(err)
	}
	c.wipe(cc)
	if err := cc.node.CatchUpFromAll(ctx, ring.Range{}, c.ids(a, b, x)); err != nil {
		t.Fatalf("the wiped source's catch-up: %v", err)
	}
	// b, the other fenced source, is cut off from a: only a and the
	// wiped source could make up a quorum of P.
	c.net.Partition(a.addr, b.addr)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := a.node.Write(wctx, k, stateSlot, []byte("v2")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the owner of P's write with only the wiped source to answer returned %v, want ErrUnavailable: no quorum", err)
	}
	// Nor does it acquire P again, even naming x.
	if err := a.node.Resign(k); err != nil {
		t.Fatal(err)
	}
	actx, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if err := a.node.AcquireWith(actx, k, P, replication.Majority, AcquireOptions{Copiers: []ring.NodeID{x.node.Self()}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the owner of P's acquisition with only the wiped source to answer returned %v, want ErrUnavailable: no quorum", err)
	}
}

// The leave the copier check alone let through: c leaves P={a,b,c}, and
// x, a member every view has shown for long, takes its place (R1 =
// {a,b,x}) and copies the range fenced for c's departure. a, whose view
// lags the leave, still gives k the set P and names x among the copiers
// its view shows: the floor refuses it all the same, naming c's departure,
// and the acquisition fails, writing nothing (above the floor it would
// have had {a,b} acknowledge writes of P that x's copy never sees). Once
// its view shows c gone, a acquires over R1 jointly from P, naming c
// gone, and reads what it last wrote.
func TestALaggingOwnerDoesNotAcquireAgainAboveALeavesFence(t *testing.T) {
	c := newCluster(t, 4, false)
	ctx := bounded(t)
	a, b, cc, x := c.members[0], c.members[1], c.members[2], c.members[3]
	k := key("leave")
	P, R1 := c.ids(a, b, cc), c.ids(a, b, x)
	ownThenFence(t, ctx, c, a, x, P, k, cc.node.Self())
	stale := refusedAtTheFloor(t, ctx, a, k, P, AcquireOptions{Copiers: []ring.NodeID{x.node.Self()}})
	if stale.Newer.Node != x.node.Self() || !slices.Equal(stale.Departed, []ring.NodeID{cc.node.Self()}) {
		t.Fatalf("a's acquisition again over P naming x was refused with %v, want x's floor naming c's departure", stale)
	}
	opts := AcquireOptions{Previous: P, Copiers: []ring.NodeID{x.node.Self()}, Gone: []ring.NodeID{cc.node.Self()}}
	if err := a.node.AcquireWith(ctx, k, R1, replication.Majority, opts); err != nil {
		t.Fatalf("a's acquisition over R1 from P naming c gone: %v", err)
	}
	// v2's write failed but reached a's own replica, which the joint
	// acquisition adopts (a failed write may have happened); v3 was never
	// sent.
	if got, err := readState(ctx, a, k); err != nil || got != "v2" {
		t.Fatalf("the owner on R1 read %q, %v; want v2", got, err)
	}
}

// Two joins in a row: x1 copies the range from P={a,b,c} fencing it, then
// x2 copies it from b and c, fencing it again. a, whose view lags x1's
// join but shows x2's, names x2: the floor the second fence left names x1
// among its earlier copiers, so the acquisition fails naming x1 and writes
// nothing (before floors kept earlier copiers, x2's fence replaced x1 at
// b and c and a acquired over P above it). Naming both, a is served.
func TestALaggingOwnerDoesNotAcquireAgainAboveTheFenceOfALaterJoin(t *testing.T) {
	c := newCluster(t, 5, false)
	ctx := bounded(t)
	a, b, cc, x1, x2 := c.members[0], c.members[1], c.members[2], c.members[3], c.members[4]
	k := key("two-joins")
	rng := keyRange(k)
	P := c.ids(a, b, cc)
	ownThenFence(t, ctx, c, a, x1, P, k)
	c.net.Partition(a.addr, x2.addr)
	if err := x2.node.SetReceiving(rng); err != nil {
		t.Fatal(err)
	}
	if err := x2.node.CopyFenced(ctx, rng, c.ids(b, cc), 2, nil); err != nil {
		t.Fatalf("x2's fenced copy from b and c: %v", err)
	}
	stale := refusedAtTheFloor(t, ctx, a, k, P, AcquireOptions{Copiers: []ring.NodeID{x2.node.Self()}})
	if stale.Newer.Node != x2.node.Self() || !slices.Equal(stale.Copiers, []ring.NodeID{x1.node.Self()}) {
		t.Fatalf("a's acquisition over P naming x2 only was refused with %v, want x2's floor naming x1 before it", stale)
	}
	opts := AcquireOptions{Copiers: []ring.NodeID{x1.node.Self(), x2.node.Self()}}
	if err := a.node.AcquireWith(ctx, k, P, replication.Majority, opts); err != nil {
		t.Fatalf("a's acquisition naming both copiers: %v", err)
	}
}

// refusedAtTheFloor has a, the owner of k over P whose range a copy
// fenced since, write v2 (refused: it fails, and a steps down), then
// acquire k again over P with opts, which must fail with a floor's
// StaleOwnerError (returned) and leave a serving nothing: its next write,
// v3, is never sent.
func refusedAtTheFloor(t *testing.T, ctx context.Context, a *member, k replica.Key, P []ring.NodeID, opts AcquireOptions) *StaleOwnerError {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := a.node.Write(wctx, k, stateSlot, []byte("v2")); err == nil {
		t.Fatal("the fenced owner's write was acknowledged")
	}
	err := a.node.AcquireWith(ctx, k, P, replication.Majority, opts)
	var stale *StaleOwnerError
	if !errors.As(err, &stale) || !stale.Floor {
		t.Fatalf("a's acquisition again over P returned %v, want a StaleOwnerError naming a floor", err)
	}
	if werr := a.node.Write(ctx, k, stateSlot, []byte("v3")); !errors.Is(werr, replica.ErrNotServing) {
		t.Fatalf("a's write after its acquisition failed returned %v, want replica.ErrNotServing", werr)
	}
	return stale
}
