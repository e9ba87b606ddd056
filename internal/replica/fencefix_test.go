package replica

import (
	"math"

	"slices"
	"testing"

	"github.com/troupe-go/troupe/internal/lincheck"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// A read held across a floor's re-acquisition is not confirmed when
// another owner overwrote the value it returns before the read was
// called, even though the owner's latest view (with its own write in
// flight) holds the value that owner wrote: the re-acquisition adopts a
// record of an epoch newer than the refused one, and steps down.
func TestAHeldReadIsNotConfirmedAfterAnotherOwnerWrote(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	owner := s.nodes[0]
	write(t, s, 0, 1)
	s.flush()
	owner.paused = true
	// Another owner acquires over {n1,n2} and writes 5: acknowledged.
	serve(t, s, 1)
	w5 := write(t, s, 1, 5)
	s.flush()
	if !released(s, 1, w5) {
		t.Fatal("the other owner's write was not acknowledged")
	}
	other := s.nodes[1].core.owned[keyA].epoch.Term
	s.nodes[1].core.Resign(keyA)
	s.apply(s.nodes[1])
	// After that write returned, a client reads at the lagging owner: it
	// returns the value 1 from its view, to be confirmed by a round.
	view, rt, err := owner.core.Read(keyA)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeValue(view[stateSlot], true)
	owner.ops[rt] = &simOp{in: regInput{Key: register{keyA, stateSlot}, Op: lincheck.Read}, out: regOutput{Value: got}}
	s.apply(owner)
	// Then a client writes 5 at the lagging owner too (a retry, an
	// idempotent set): its view becomes {5}.
	write(t, s, 0, 5)
	// The copier (n2, in the owner's set) fences above the other owner's
	// term: refusals name the floor, not the other owner.
	for _, n := range s.nodes {
		n.core.Step(Message{Type: MsgFence, From: s.nodes[2].id, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: other + 1}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
	owner.paused = false
	s.flush()
	for _, op := range s.history {
		in := op.Input.(regInput)
		if in.Op == lincheck.Read && op.Output.(regOutput).Value == 1 {
			t.Fatalf("a read called after the write of 5 was acknowledged returned 1 and was confirmed (owner serving %v)", owner.core.Serving(keyA))
		}
	}
}

// Two increments of a counter from 1, each computed by its owner from
// what Current shows, are not both acknowledged: the lagging owner's
// increment was computed from a view another owner had overwritten, and
// its re-acquisition above the floor steps down although the values
// match.
func TestAHeldIncrementIsNotAcknowledgedAfterAnotherOwnerIncremented(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	owner := s.nodes[0]
	write(t, s, 0, 1)
	s.flush()
	owner.paused = true
	serve(t, s, 1)
	inc := func(i int) Ticket {
		cur := decodeValue(s.nodes[i].core.Current(keyA, stateSlot))
		return write(t, s, i, cur+1)
	}
	a := inc(1) // 1 -> 2 at the other owner
	s.flush()
	if !released(s, 1, a) {
		t.Fatal("the other owner's increment was not acknowledged")
	}
	other := s.nodes[1].core.owned[keyA].epoch.Term
	s.nodes[1].core.Resign(keyA)
	s.apply(s.nodes[1])
	b := inc(0) // 1 -> 2 at the lagging owner, from its stale view
	for _, n := range s.nodes {
		n.core.Step(Message{Type: MsgFence, From: s.nodes[2].id, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: other + 1}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
	owner.paused = false
	s.flush()
	done := 0
	for _, op := range s.history {
		if in := op.Input.(regInput); in.Op == lincheck.Write && in.New == 2 && !op.Output.(regOutput).Unknown {
			done++
		}
	}
	acked := done == 2 && released(s, 0, b)
	if acked && owner.core.Serving(keyA) {
		t.Fatalf("both increments from 1 were acknowledged; the counter holds %d", decodeValue(owner.core.Current(keyA, stateSlot)))
	}
}

// Floors are never collected: once the copier that raised a floor is no
// longer in a key's set (a later change moved it out), an acquisition by
// a node whose own replica was not fenced is refused by the floor. The
// core cannot tell an old floor from one raised for a change its caller's
// view does not show yet: it steps down, naming the floor and its copier,
// and acquires above the floor once the caller names the copier as one
// its view shows (AcquireOptions.Copiers), so a new key does not fail
// its first ask on such a node.
func TestAFreshKeyInAnOldFloorIsAcquiredOnceTheCallerShowsItsCopier(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	for _, n := range s.nodes[1:] {
		n.core.Step(Message{Type: MsgFence, From: nodeX, To: n.id, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 9}})
		s.apply(n)
	}
	s.net = slices.DeleteFunc(s.net, func(m Message) bool { return m.Type == MsgFenced })
	a := s.nodes[0]
	if err := a.core.Acquire(keyA, s.replicas[keyA], s.level); err != nil {
		t.Fatal(err)
	}
	var changes []Change
	for range 10 {
		rd := a.core.Ready()
		changes = append(changes, rd.Changes...)
		for _, m := range rd.Messages {
			for _, n := range s.nodes {
				if n.id == m.To {
					n.core.Step(m)
					for _, back := range n.core.Ready().Messages {
						a.core.Step(back)
					}
				}
			}
		}
	}
	if a.core.Serving(keyA) || len(changes) != 1 || changes[0].Serving || !changes[0].Floor || changes[0].Epoch != (Epoch{Term: 9, Node: nodeX}) {
		t.Fatalf("refused by the floor of a copier its caller did not name, the acquisition serves %v and reported %v: want it stepped down, naming the floor", a.core.Serving(keyA), changes)
	}
	if err := a.core.AcquireWith(keyA, s.replicas[keyA], s.level, AcquireOptions{Copiers: []ring.NodeID{nodeX}}); err != nil {
		t.Fatal(err)
	}
	s.apply(a)
	s.flush()
	if !a.core.Serving(keyA) {
		t.Fatalf("the acquisition of a key with no records, whose caller's view shows the floor's copier, failed")
	}
}

// A fence reports the term of a floor another copier raised over the
// range, so that the fencing ends above it and its own copier, in the
// range's current set, is the one refusals name; the copier's own floor
// is left out, so that a fence it sends again starts no new round.
func TestAFenceReportsAnotherCopiersFloor(t *testing.T) {
	if keyA.Token() < 100 || keyA.Token() > math.MaxUint64-100 {
		t.Fatal("keyA's token is too close to the ends of the ring for this test")
	}
	// A wider range that holds keyA's token.
	wide := ring.Range{Start: keyA.Token() - 100, End: keyA.Token() + 100}
	b := New(nodeB, Counting)
	b.Step(Message{Type: MsgFence, From: nodeX, To: nodeB, Range: keyRange(keyA), Round: 1, Epoch: Epoch{Term: 9}})
	b.Ready()
	b.Step(Message{Type: MsgFence, From: nodeC, To: nodeB, Range: wide, Round: 2, Epoch: Epoch{Term: 3}})
	if m := messagesOf(b.Ready(), MsgFenced); len(m) != 1 || m[0].Promised.Term != 9 {
		t.Fatalf("a fence by c at 3 over x's floor at 9 was answered %v, want promised 9", m)
	}
	b.Step(Message{Type: MsgFence, From: nodeC, To: nodeB, Range: wide, Round: 2, Epoch: Epoch{Term: 10}})
	rd := b.Ready()
	if m := messagesOf(rd, MsgFenced); len(m) != 1 || m[0].Promised.Term != 9 {
		t.Fatalf("c's fence at 10 was answered %v, want promised 9", m)
	}
	if f := b.floors.at(keyA.Token()); f != (Epoch{Term: 10, Node: nodeC}) {
		t.Fatalf("keyA's floor is %v after c's fence at 10, want c's", f)
	}
	// Sent again (its answer was slow): c's own floor, which replaced
	// x's, is not reported.
	b.Step(Message{Type: MsgFence, From: nodeC, To: nodeB, Range: wide, Round: 2, Epoch: Epoch{Term: 10}})
	if m := messagesOf(b.Ready(), MsgFenced); len(m) != 1 || m[0].Promised.Term != 0 {
		t.Fatalf("c's fence at 10 sent again was answered %v, want promised 0", m)
	}
}

// An acquisition that has not served acquires again above a floor a few
// times in a row, then steps down: a fencing that keeps raising the
// floor is met by the caller's backoff.
func TestAnAcquisitionRefusedByFloorsAgainAndAgainStepsDown(t *testing.T) {
	a := New(nodeA, Counting)
	if err := a.AcquireWith(keyA, []ring.NodeID{nodeA, nodeB, nodeC}, replication.Majority, AcquireOptions{Copiers: []ring.NodeID{nodeX}}); err != nil {
		t.Fatal(err)
	}
	for i := range maxRestarts + 1 {
		rd := a.Ready()
		prepares := messagesOf(rd, MsgPrepare)
		if i > 0 && len(rd.Changes) > 0 {
			t.Fatalf("refused by a floor %d times, the acquisition reported %v", i, rd.Changes)
		}
		if len(prepares) != 2 {
			t.Fatalf("after %d refusals the acquisition sent %v, want prepares to b and c", i, rd.Messages)
		}
		e := prepares[0].Epoch
		// The floor of a copier outside the set that the caller's view
		// shows, raised above each epoch.
		a.Step(Message{Type: MsgRefuse, From: nodeB, To: nodeA, Key: keyA, Epoch: e, Promised: Epoch{Term: e.Term + 5, Node: nodeX}, Floor: true})
	}
	rd := a.Ready()
	if a.Holds(keyA, []ring.NodeID{nodeA, nodeB, nodeC}, AcquireOptions{}) || len(rd.Changes) != 1 || rd.Changes[0].Serving {
		t.Fatalf("refused by floors %d times, the acquisition holds the key %v and reported %v: want it stepped down", maxRestarts+1, a.Holds(keyA, []ring.NodeID{nodeA, nodeB, nodeC}, AcquireOptions{}), rd.Changes)
	}
}
