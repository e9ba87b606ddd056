package membership

import (
	"testing"
	"time"
)

// as returns p's record with status st at incarnation inc.
func as(p Member, st Status, inc uint64) Member {
	p = p.Clone()
	p.Status, p.Incarnation = st, inc
	return p
}

// Leaving members are not seen alive for the majority: a node of five
// that sees two members leaving and two suspect has no majority (one
// alive of the three staying) and steps down after the grace, however
// responsive the leavers still are.
func TestLeavingMembersMakeNoMajority(t *testing.T) {
	c := newTestCore(t, "a:1")
	b, d, e, f := peer("b:1"), peer("d:1"), peer("e:1"), peer("f:1")
	for _, p := range []Member{b, d, e, f} {
		befriend(c, p)
	}
	c.Tick(t0)
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{as(b, StatusLeaving, 1), as(d, StatusLeaving, 1), accusedBy(e, "x:1", "y:1"), accusedBy(f, "x:1", "y:1")}})
	tick := fast.Heartbeat / 4
	for now := t0.Add(tick); now.Sub(t0) <= fast.DeadAfter; now = now.Add(tick) {
		c.Tick(now)
		c.Step(Message{Type: MsgAck, From: b.ID})
		c.Step(Message{Type: MsgAck, From: d.ID})
		c.Ready()
	}
	if c.Owning() {
		t.Fatal("expected a node that sees one of three staying members alive, beside two leaving ones, to step down")
	}
}

// A member that leaves drops out of the count on both sides: the survivor
// of a two-member cluster keeps owning while the other hands over.
func TestTheOtherOfTwoKeepsOwningWhileOneLeaves(t *testing.T) {
	c := newTestCore(t, "a:1")
	b := peer("b:1")
	befriend(c, b)
	c.Tick(t0)
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{as(b, StatusLeaving, 1)}})
	tick := fast.Heartbeat / 4
	for now := t0.Add(tick); now.Sub(t0) <= 2*fast.DeadAfter; now = now.Add(tick) {
		c.Tick(now)
		c.Step(Message{Type: MsgAck, From: b.ID})
		c.Ready()
		if !c.Owning() {
			t.Fatalf("expected the member that stays to keep owning while the other leaves; stepped down at %v", now.Sub(t0))
		}
	}
}

// A member that never completes its leave (its hand-over hangs while the
// process runs on) does not stay leaving forever: after RemoveAfter a node
// that sees a majority removes it, as it removes the dead.
func TestAMemberThatNeverCompletesItsLeaveEndsLeft(t *testing.T) {
	c := newTestCore(t, "a:1")
	b, o := peer("b:1"), peer("c:1")
	befriend(c, b)
	befriend(c, o)
	c.Tick(t0)
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{as(b, StatusLeaving, 1)}})
	tick := fast.Heartbeat / 4
	var leftAt time.Duration
	for now := t0.Add(tick); now.Sub(t0) < 3*fast.RemoveAfter; now = now.Add(tick) {
		c.Tick(now)
		c.Step(Message{Type: MsgAck, From: b.ID})
		c.Step(Message{Type: MsgAck, From: o.ID})
		c.Ready()
		if st := statusIn(c, b.ID); st != StatusLeaving {
			if st != StatusLeft {
				t.Fatalf("expected a responsive leaver to stay leaving until removed; it became %v", st)
			}
			leftAt = now.Sub(t0)
			break
		}
	}
	if leftAt < fast.RemoveAfter || leftAt > fast.RemoveAfter+2*fast.Heartbeat {
		t.Fatalf("expected a member leaving for RemoveAfter (%v) to be removed then; removed after %v (0: never)", fast.RemoveAfter, leftAt)
	}
}

// The leaver itself, told it was removed, goes inert.
func TestALeaverRemovedByOthersIsRemoved(t *testing.T) {
	c := newTestCore(t, "a:1")
	b := peer("b:1")
	befriend(c, b)
	c.Tick(t0)
	if err := c.StartLeave(); err != nil {
		t.Fatal(err)
	}
	c.Ready()
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{as(c.Self(), StatusLeft, c.Self().Incarnation)}})
	if !c.Removed() || c.Owning() {
		t.Fatal("expected a leaver that learns it was removed to be removed and own nothing")
	}
	if err := c.CompleteLeave(); err != ErrRemoved {
		t.Fatalf("expected CompleteLeave after removal to report ErrRemoved; got %v", err)
	}
}

// A leaver keeps its own standing while it hands over, even when it is
// the last member, so its keys keep an owner until they have moved.
func TestALeaverKeepsOwningWhileItHandsOver(t *testing.T) {
	for _, others := range [][]Member{nil, {peer("b:1")}} {
		c := newTestCore(t, "a:1")
		for _, p := range others {
			befriend(c, p)
		}
		c.Tick(t0)
		if err := c.StartLeave(); err != nil {
			t.Fatal(err)
		}
		c.Ready()
		tick := fast.Heartbeat / 4
		for now := t0.Add(tick); now.Sub(t0) <= 2*fast.DeadAfter; now = now.Add(tick) {
			c.Tick(now)
			for _, p := range others {
				c.Step(Message{Type: MsgAck, From: p.ID})
			}
			c.Ready()
			if !c.Owning() {
				t.Fatalf("expected a leaver with %d other members to keep owning while it hands over; stepped down at %v", len(others), now.Sub(t0))
			}
		}
	}
}
