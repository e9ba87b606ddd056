package ring

import (
	"errors"
	"testing"
)

func TestZeroPlacementIsTheEmptyRingWithoutHandoff(t *testing.T) {
	var p Placement
	if p.InHandoff() {
		t.Error("zero Placement is in handoff, want settled")
	}
	if _, err := p.OwnerNow(1, 1, nil); !errors.Is(err, ErrEmptyRing) {
		t.Errorf("OwnerNow on the zero Placement returned %v, want ErrEmptyRing", err)
	}
	if p.Moves(1) != nil {
		t.Error("zero Placement has moves, want none")
	}
}

func TestNextKeepsThePreviousRingUntilSettled(t *testing.T) {
	ms := seededMembers(21, 4)
	before, after := New(ms[:3]), New(ms)
	p := NewPlacement(before).Next(after)
	if prev, ok := p.Previous(); !ok || prev != before {
		t.Fatalf("Previous after Next = %v, %v; want the ring before and true", prev, ok)
	}
	if p.Current() != after {
		t.Fatal("Current after Next is not the new ring")
	}
	settled := p.Settled()
	if prev, ok := settled.Previous(); ok || prev != nil || settled.InHandoff() {
		t.Errorf("Previous once settled = %v, %v; want nil, false", prev, ok)
	}
	if settled.Current() != after {
		t.Error("Settled changed the current ring")
	}
}

func TestFirstJoinHandsOffFromTheEmptyRing(t *testing.T) {
	p := NewPlacement(nil).Next(New(seededMembers(22, 1)))
	if !p.InHandoff() {
		t.Fatal("first member joining the empty ring is not a handoff")
	}
	if _, err := p.OwnerBefore(1, 1, nil); !errors.Is(err, ErrEmptyRing) {
		t.Errorf("OwnerBefore the first join returned %v, want ErrEmptyRing", err)
	}
}

func TestNextWithTheSameMembersIsNoChange(t *testing.T) {
	ms := seededMembers(23, 3)
	p := NewPlacement(New(ms))
	if q := p.Next(New([]NodeID{ms[2], ms[0], ms[1]})); q.InHandoff() || q.Current() != p.Current() {
		t.Error("Next with a ring of the same members started a handoff, want no change")
	}
}

func TestNextDuringHandoffForgetsTheOldestRing(t *testing.T) {
	ms := seededMembers(24, 5)
	r3, r4, r5 := New(ms[:3]), New(ms[:4]), New(ms)
	p := NewPlacement(r3).Next(r4).Next(r5)
	if prev, ok := p.Previous(); !ok || prev != r4 {
		t.Errorf("Previous after two changes = %v, %v; want the middle ring", prev, ok)
	}
}

func TestPlacementMovesAreTheRangesTheJoinerTakes(t *testing.T) {
	ms := seededMembers(25, 4)
	joiner := ms[3]
	p := NewPlacement(New(ms[:3])).Next(New(ms))
	moves := p.Moves(1)
	if len(moves) == 0 {
		t.Fatal("a join moved no ranges")
	}
	for _, mv := range moves {
		if mv.After[0] != joiner {
			t.Errorf("range %v moved to %v, want only to the joiner %v", mv.Range, mv.After, joiner)
		}
		if mid := mv.Range.End; true {
			before, _ := p.OwnerBefore(mid, 1, nil)
			now, _ := p.OwnerNow(mid, 1, nil)
			if before != mv.Before[0] || now != joiner {
				t.Errorf("token %#x in moved range: owner before %v and now %v, want %v and %v", uint64(mid), before, now, mv.Before[0], joiner)
			}
		}
	}
}

func TestRangeContains(t *testing.T) {
	cases := []struct {
		g    Range
		t    Token
		want bool
	}{
		{Range{10, 20}, 10, false}, {Range{10, 20}, 11, true}, {Range{10, 20}, 20, true}, {Range{10, 20}, 21, false},
		{Range{20, 10}, 21, true}, {Range{20, 10}, ^Token(0), true}, {Range{20, 10}, 0, true}, {Range{20, 10}, 10, true},
		{Range{20, 10}, 15, false}, {Range{20, 10}, 20, false},
		{Range{7, 7}, 7, true}, {Range{7, 7}, 0, true},
	}
	for _, c := range cases {
		if got := c.g.Contains(c.t); got != c.want {
			t.Errorf("%v.Contains(%d) = %v, want %v", c.g, c.t, got, c.want)
		}
	}
}

func TestMovesFromTheEmptyRingToOneMemberCoverTheWholeRing(t *testing.T) {
	m := seededMembers(26, 1)[0]
	moves := Moves(nil, New([]NodeID{m}), 3)
	if len(moves) != 1 || moves[0].Range.Start != moves[0].Range.End {
		t.Fatalf("Moves from the empty ring to one member gave %d moves, want one move of the whole ring", len(moves))
	}
	if len(moves[0].Before) != 0 || len(moves[0].After) != 1 || moves[0].After[0] != m {
		t.Errorf("whole-ring move has replicas %v -> %v, want none -> [%v]", moves[0].Before, moves[0].After, m)
	}
}

func TestMovesBetweenEqualRingsAreNone(t *testing.T) {
	ms := seededMembers(27, 5)
	if moves := Moves(New(ms), New(ms), 3); len(moves) != 0 {
		t.Errorf("Moves between two rings of the same members gave %d moves, want none", len(moves))
	}
}

func TestServingStaysWithThePreviousOwnerUntilTheRangeIsReceived(t *testing.T) {
	ms := seededMembers(28, 4)
	joiner := ms[3]
	p := NewPlacement(New(ms[:3])).Next(New(ms))
	mv := p.Moves(1)[0]
	tok := mv.Range.End
	if got, _ := p.Serving(tok, 1, nil); got != mv.Before[0] {
		t.Fatalf("Serving a moved key before its range arrived = %v, want the previous owner %v", got, mv.Before[0])
	}
	p = p.Received(mv.Range)
	if got, _ := p.Serving(tok, 1, nil); got != joiner {
		t.Errorf("Serving a moved key once its range arrived = %v, want the joiner %v", got, joiner)
	}
}

func TestReceivedLeavesTheReceiverUnchanged(t *testing.T) {
	ms := seededMembers(29, 4)
	p := NewPlacement(New(ms[:3])).Next(New(ms))
	mv := p.Moves(1)[0]
	_ = p.Received(mv.Range)
	if got, _ := p.Serving(mv.Range.End, 1, nil); got != mv.Before[0] {
		t.Errorf("Received changed the Placement it was called on: Serving = %v, want still %v", got, mv.Before[0])
	}
}

func TestReceivingTheWholeRingServesEverythingFromTheCurrentRing(t *testing.T) {
	ms := seededMembers(30, 3)
	p := NewPlacement(New(ms[:2])).Next(New(ms)).Received(Range{5, 5})
	for _, tok := range seededKeyTokens(200) {
		now, _ := p.OwnerNow(tok, 1, nil)
		if got, _ := p.Serving(tok, 1, nil); got != now {
			t.Fatalf("Serving %#x after the whole ring arrived = %v, want the current owner %v", uint64(tok), got, now)
		}
	}
}
