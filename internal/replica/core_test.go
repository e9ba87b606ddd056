package replica

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/troupe-go/troupe/internal/lincheck"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

var (
	keyA      = Key{Type: "counter", ID: "a"}
	stateSlot = Slot{Kind: KindState}
)

// flush delivers every message in flight, in order, until none is left
// but those for paused nodes.
func (s *sim) flush() {
	for i := 0; ; i++ {
		if i > 10000 {
			panic("messages never stop")
		}
		j := slices.IndexFunc(s.net, func(m Message) bool {
			n := s.node(m.To)
			return n != nil && !n.paused
		})
		if j < 0 {
			return
		}
		s.deliver(j, false)
	}
}

// serve acquires keyA on node i and delivers until it serves.
func serve(t *testing.T, s *sim, i int) {
	t.Helper()
	s.acquire(s.nodes[i], keyA)
	s.flush()
	if !s.nodes[i].core.Serving(keyA) {
		t.Fatalf("%s does not serve %v after every message was delivered", s.nodes[i].id, keyA)
	}
}

// write writes v at node i and returns the ticket.
func write(t *testing.T, s *sim, i, v int) Ticket {
	t.Helper()
	n := s.nodes[i]
	tk, err := n.core.Write(keyA, stateSlot, encodeValue(v), false)
	if err != nil {
		t.Fatalf("write at %s: %v", n.id, err)
	}
	n.ops[tk] = &simOp{in: regInput{Key: register{keyA, stateSlot}, Op: lincheck.Write, New: v}}
	s.apply(n)
	return tk
}

func released(s *sim, i int, tk Ticket) bool {
	_, waiting := s.nodes[i].ops[tk]
	return !waiting
}

func TestAnOwnerServesAfterAQuorumPromisedAndWritesMeetTheLevel(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	tk := write(t, s, 0, 7)
	if released(s, 0, tk) {
		t.Fatal("a Majority write was released before any other replica stored it")
	}
	s.flush()
	if !released(s, 0, tk) {
		t.Fatal("a Majority write was not released after every replica answered")
	}
	for _, n := range s.nodes {
		if got := decodeValue(n.core.Stored(keyA, stateSlot)); got != 7 {
			t.Errorf("%s stores %d, want 7", n.id, got)
		}
	}
}

func TestLevelsCountTheFullReplicaSet(t *testing.T) {
	for _, tc := range []struct {
		level replication.Level
		// down is how many of the three replicas are unreachable.
		down     int
		released bool
	}{
		{replication.One, 2, true},
		{replication.Majority, 1, true},
		{replication.Majority, 2, false},
		{replication.All, 0, true},
		{replication.All, 1, false},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			s := newSim(t, 3, tc.level, []Key{keyA})
			serve(t, s, 0)
			for i := 1; i <= tc.down; i++ {
				s.nodes[i].paused = true
			}
			tk := write(t, s, 0, 1)
			s.flush()
			s.net = nil // what the paused replicas would get later
			if got := released(s, 0, tk); got != tc.released {
				t.Fatalf("level %v with %d of 3 replicas down: released %v, want %v", tc.level, tc.down, got, tc.released)
			}
		})
	}
}

// pausedOwner serves keyA on node 0 with value 1, pauses it while node 1
// takes over and writes 2, and resumes node 0 with the new owner's
// messages still on their way to it.
func pausedOwner(t *testing.T) *sim {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	write(t, s, 0, 1)
	s.flush()
	s.nodes[0].paused = true
	serve(t, s, 1)
	write(t, s, 1, 2)
	s.flush()
	s.nodes[0].paused = false
	if !s.nodes[0].core.Serving(keyA) {
		t.Fatal("the paused owner should still believe it serves: nothing told it otherwise")
	}
	return s
}

func TestAPausedOwnerGetsNoWriteAcknowledged(t *testing.T) {
	s := pausedOwner(t)
	tk := write(t, s, 0, 3)
	s.flush()
	if !released(s, 0, tk) {
		t.Fatal("the stale owner's write neither completed nor failed")
	}
	for _, op := range s.history {
		if in := op.Input.(regInput); in.New == 3 && op.Return != lincheck.Pending {
			t.Fatal("the stale owner's write was acknowledged")
		}
	}
	if s.nodes[0].core.Serving(keyA) {
		t.Fatal("the stale owner did not step down after its replicas refused it")
	}
	if got := decodeValue(s.nodes[1].core.Current(keyA, stateSlot)); got != 2 {
		t.Fatalf("the new owner's state is %d, want 2", got)
	}
}

func TestAPausedOwnerServesNoStaleRead(t *testing.T) {
	s := pausedOwner(t)
	n := s.nodes[0]
	view, tk, err := n.core.Read(keyA)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeValue(view[stateSlot], true); got != 1 {
		t.Fatalf("the stale owner's view is %d, want its own last write 1", got)
	}
	n.ops[tk] = &simOp{in: regInput{Op: lincheck.Read}}
	s.apply(n)
	s.flush()
	for _, op := range s.history {
		if op.Input.(regInput).Op == lincheck.Read {
			t.Fatalf("the stale owner answered a read with %+v", op.Output)
		}
	}
	if !released(s, 0, tk) || n.core.Serving(keyA) {
		t.Fatal("the stale owner's read did not fail with its step-down")
	}
}

func TestAReplicaStillReceivingItsRangeDoesNotCount(t *testing.T) {
	keyB := Key{Type: "counter", ID: "b"}
	s := newSim(t, 3, replication.Majority, []Key{keyA, keyB})
	serve(t, s, 0)
	s.acquire(s.nodes[0], keyB)
	s.flush()
	// Replica 1 receives the range of keyA only; replica 2 is down.
	ta := keyA.Token()
	s.nodes[1].core.AddReceiving(ring.Range{Start: ta - 1, End: ta})
	s.nodes[2].paused = true
	tk := write(t, s, 0, 1)
	n := s.nodes[0]
	tb, err := n.core.Write(keyB, stateSlot, encodeValue(2), false)
	if err != nil {
		t.Fatal(err)
	}
	n.ops[tb] = &simOp{in: regInput{Op: lincheck.Write}}
	s.apply(n)
	s.flush()
	if released(s, 0, tk) {
		t.Fatal("a write counted a replica still receiving the key's range")
	}
	if !released(s, 0, tb) {
		t.Fatal("a write outside the range being received did not count that replica")
	}
	s.nodes[1].core.Received(ring.Range{Start: ta - 1, End: ta})
	// The accept is sent again once it went unanswered a whole tick
	// period: at the second tick after it was sent.
	s.tick(n)
	s.tick(n)
	s.flush()
	if !released(s, 0, tk) {
		t.Fatal("the write was not released once the replica caught up")
	}
}

func TestATombstoneIsNotUndoneByAStaleReplica(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	write(t, s, 0, 5)
	s.flush()
	// Replica 2 misses the delete and keeps the old state.
	s.nodes[2].paused = true
	n := s.nodes[0]
	tk, err := n.core.Write(keyA, stateSlot, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	n.ops[tk] = &simOp{in: regInput{Op: lincheck.Write}}
	s.apply(n)
	s.flush()
	s.net = nil
	s.nodes[2].paused = false
	// The next owner hears from the stale replica and one that saw the
	// delete.
	s.nodes[0].paused = true
	serve(t, s, 2)
	r, ok := s.nodes[2].core.Current(keyA, stateSlot)
	if !ok || !r.Tombstone {
		t.Fatalf("the new owner adopted %+v, want the tombstone", r)
	}
}

func TestOlderEpochsAreRefusedWithTheNewerOne(t *testing.T) {
	c := New(ring.NodeID{Addr: "r", Incarnation: 1}, Counting)
	newer := Epoch{Term: 5, Node: ring.NodeID{Addr: "b", Incarnation: 1}}
	older := Epoch{Term: 4, Node: ring.NodeID{Addr: "z", Incarnation: 9}}
	c.Step(Message{Type: MsgPrepare, From: newer.Node, To: c.Self(), Key: keyA, Epoch: newer})
	rd := c.Ready()
	if len(rd.Persist) != 1 || rd.Persist[0].Kind != KindPromise || rd.Persist[0].Epoch != newer {
		t.Fatalf("a promise was not persisted before its answer: %+v", rd.Persist)
	}
	c.Step(Message{Type: MsgAccept, From: older.Node, To: c.Self(), Key: keyA, Epoch: older,
		Records: []Record{{Kind: KindState, Epoch: older, Version: 9, Value: []byte("x")}}})
	rd = c.Ready()
	if len(rd.Messages) != 1 || rd.Messages[0].Type != MsgRefuse || rd.Messages[0].Promised != newer {
		t.Fatalf("an older epoch's write got %+v, want a refusal naming %v", rd.Messages, newer)
	}
	if _, ok := c.Stored(keyA, stateSlot); ok || len(rd.Persist) != 0 {
		t.Fatal("a refused write was stored")
	}
}

func TestAcquireNeedsTheOwnerInTheReplicaSet(t *testing.T) {
	c := New(ring.NodeID{Addr: "a", Incarnation: 1}, Counting)
	if err := c.Acquire(keyA, []ring.NodeID{{Addr: "b", Incarnation: 1}}, replication.Majority); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("Acquire outside the replica set: %v, want ErrNotReplica", err)
	}
	if _, err := c.Write(keyA, stateSlot, nil, false); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Write on a key not served: %v, want ErrNotServing", err)
	}
	if _, _, err := c.Read(keyA); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Read on a key not served: %v, want ErrNotServing", err)
	}
}

func TestReadsWaitingTogetherShareOneCheckRound(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	n := s.nodes[0]
	for range 3 {
		_, tk, err := n.core.Read(keyA)
		if err != nil {
			t.Fatal(err)
		}
		n.ops[tk] = &simOp{in: regInput{Op: lincheck.Read}}
	}
	rd := n.core.Ready()
	checks := 0
	for _, m := range rd.Messages {
		if m.Type == MsgCheck {
			checks++
		}
	}
	// The first read opens a round; the next two wait for the next one.
	if checks != 2 {
		t.Fatalf("three reads sent %d checks, want 2 (one round to the two other replicas)", checks)
	}
	s.net = append(s.net, rd.Messages...)
	s.flush()
	if len(n.ops) != 0 {
		t.Fatalf("%d reads still wait after every check was answered", len(n.ops))
	}
}

// A message lost in flight is sent again only once it went unanswered a
// whole tick period, so a Tick right after a send does not repeat it.
func TestTickRepeatsOnlyWhatWentUnansweredATickPeriod(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	n := s.nodes[0]
	write(t, s, 0, 7)
	s.net = nil // the accepts are lost
	s.tick(n)
	if len(s.net) != 0 {
		t.Fatalf("the first tick after the write repeated %d messages, want none", len(s.net))
	}
	s.tick(n)
	accepts := 0
	for _, m := range s.net {
		if m.Type == MsgAccept {
			accepts++
		}
	}
	if accepts != 2 {
		t.Fatalf("the second tick sent %d accepts, want one to each other replica", accepts)
	}
	s.flush()
	s.tick(n)
	s.tick(n)
	if len(s.net) != 0 {
		t.Fatalf("ticks after every answer arrived sent %+v", s.net)
	}
}

// TestWritesCompleteInOrderAcrossSlots: a write that met its level waits
// for every earlier write of its key, whatever their slots, since its
// effects must not leave before theirs.
func TestWritesCompleteInOrderAcrossSlots(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	serve(t, s, 0)
	first := write(t, s, 0, 1)
	n := s.nodes[0]
	second, err := n.core.Write(keyA, Slot{Kind: KindContinuity, Name: "req"}, encodeValue(2), false)
	if err != nil {
		t.Fatal(err)
	}
	n.ops[second] = &simOp{in: regInput{Key: register{keyA, Slot{Kind: KindContinuity, Name: "req"}}, Op: lincheck.Write, New: 2}}
	s.apply(n)
	// Deliver everything but the first write's accepts: the second write
	// meets its level, the first does not.
	for {
		j := slices.IndexFunc(s.net, func(m Message) bool {
			return m.Type != MsgAccept || m.Records[0].Slot() != stateSlot
		})
		if j < 0 {
			break
		}
		s.deliver(j, false)
	}
	if released(s, 0, second) {
		t.Fatal("the second write (another slot) was released before the first met its level")
	}
	s.flush()
	if !released(s, 0, first) || !released(s, 0, second) {
		t.Fatal("the writes were not released once both met their level")
	}
}

// A peer that claims the largest term must not make the next
// acquisition's term wrap to zero, which every older epoch would beat:
// the acquisition is refused instead.
func TestAnAcquisitionAfterTheLargestTermIsRefused(t *testing.T) {
	s := newSim(t, 3, replication.Majority, []Key{keyA})
	n := s.nodes[0]
	hostile := s.nodes[1].id
	n.core.Step(Message{Type: MsgPrepare, From: hostile, To: n.id, Key: keyA, Epoch: Epoch{Term: math.MaxUint64, Node: hostile}})
	s.apply(n)
	if err := n.core.Acquire(keyA, s.replicas[keyA], replication.Majority); !errors.Is(err, ErrTermExhausted) {
		t.Fatalf("an acquisition after term MaxUint64 returned %v, want ErrTermExhausted", err)
	}
	if n.core.owned[keyA] != nil {
		t.Fatal("a refused acquisition left the key owned")
	}
}

// A recycled Ready's slices hold the next Ready, emptied first; an older
// Ready given back once the core has more to report changes nothing.
func TestARecycledReadyHoldsTheNext(t *testing.T) {
	ids := []ring.NodeID{{Addr: "n0", Incarnation: 1}, {Addr: "n1", Incarnation: 1}, {Addr: "n2", Incarnation: 1}}
	c := New(ids[0], Counting)
	if err := c.Acquire(keyA, ids, replication.Majority); err != nil {
		t.Fatal(err)
	}
	first := c.Ready()
	if len(first.Messages) != 2 {
		t.Fatalf("an acquisition sent %d messages, want a prepare to each of the two others", len(first.Messages))
	}
	room := &first.Messages[:1][0]
	c.Recycle(first)
	if first.Messages[0].Type != 0 || first.Messages[1].Type != 0 {
		t.Fatal("the recycled messages were not emptied")
	}
	c.Step(Message{Type: MsgPromise, From: ids[1], To: ids[0], Key: keyA, Epoch: c.owned[keyA].epoch, Counted: true})
	c.Recycle(c.Ready())
	if !c.Serving(keyA) {
		t.Fatal("a quorum of promises without records did not serve")
	}
	if _, err := c.Write(keyA, stateSlot, []byte("v"), false); err != nil {
		t.Fatal(err)
	}
	next := c.Ready()
	if len(next.Messages) != 2 || &next.Messages[0] != room {
		t.Fatalf("a write's %d accepts are not in the recycled slice", len(next.Messages))
	}
	for _, m := range next.Messages {
		if m.Type != MsgAccept || m.Key != keyA || len(m.Records) != 1 {
			t.Fatalf("the next Ready holds %+v, want an accept of the write", m)
		}
	}
	// Not the last Ready: the core has reported something since.
	if _, err := c.Write(keyA, stateSlot, []byte("w"), false); err != nil {
		t.Fatal(err)
	}
	pending := len(c.ready.Messages)
	c.Recycle(first)
	if len(c.ready.Messages) != pending {
		t.Fatal("recycling an older Ready changed what the core has to report")
	}
}
