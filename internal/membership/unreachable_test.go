package membership

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// accusedBy returns rec as suspect at its incarnation, accused by addrs.
func accusedBy(rec Member, addrs ...string) Member {
	rec = rec.Clone()
	rec.Status = StatusSuspect
	rec.Accusers = addrs
	return rec
}

// A failed dial is an accusation at once; with a second accuser the member
// is dead DeadAfter after the dial failed, not SuspectAfter + DeadAfter
// after its last message.
func TestAFailedDialAccusesAtOnceAndKillsAfterDeadAfter(t *testing.T) {
	c := newTestCore(t, "a:1")
	b, o, d := peer("b:1"), peer("c:1"), peer("d:1")
	for _, p := range []Member{b, o, d} {
		befriend(c, p)
	}
	tick := fast.Heartbeat / 4
	c.Tick(t0)
	failed := t0.Add(tick / 2)
	c.Unreachable(d.ID, failed)
	if m, _ := c.Member(d.ID); m.Status != StatusSuspect || !slices.Contains(m.Accusers, "a:1") {
		t.Fatalf("expected a failed dial to make d suspect with this node among its accusers; got %v", m)
	}
	c.Step(Message{Type: MsgGossip, From: o.ID, Records: []Member{accusedBy(d, o.ID.Addr)}})
	var deadAt time.Duration
	for now := t0.Add(tick); now.Sub(t0) < 4*(fast.SuspectAfter+fast.DeadAfter); now = now.Add(tick) {
		c.Tick(now)
		c.Step(Message{Type: MsgAck, From: b.ID})
		c.Step(Message{Type: MsgAck, From: o.ID})
		c.Ready()
		if statusIn(c, d.ID) == StatusDead {
			deadAt = now.Sub(failed)
			break
		}
	}
	if deadAt < fast.DeadAfter || deadAt > fast.DeadAfter+tick {
		t.Fatalf("expected d dead DeadAfter (%v) after the failed dial, well before SuspectAfter+DeadAfter (%v); dead after %v",
			fast.DeadAfter, fast.SuspectAfter+fast.DeadAfter, deadAt)
	}
}

// One observer's failed dial is one accusation: without a second accuser
// the member is never declared dead, however long the dial keeps failing.
func TestOneFailedDialAloneNeverKills(t *testing.T) {
	c := newTestCore(t, "a:1")
	b, o, d := peer("b:1"), peer("c:1"), peer("d:1")
	for _, p := range []Member{b, o, d} {
		befriend(c, p)
	}
	tick := fast.Heartbeat / 4
	for now := t0; now.Sub(t0) < 4*(fast.SuspectAfter+fast.DeadAfter); now = now.Add(tick) {
		c.Tick(now)
		c.Unreachable(d.ID, now)
		c.Step(Message{Type: MsgAck, From: b.ID})
		c.Step(Message{Type: MsgAck, From: o.ID})
		c.Ready()
		if st := statusIn(c, d.ID); st == StatusDead {
			t.Fatalf("expected one accuser's failed dials never to kill d; dead at %v", now.Sub(t0))
		}
	}
}

// What arrives from the member after the failed dial (it reconnected)
// withdraws the fast verdict: it dies, if at all, by silence.
func TestAMemberHeardAfterTheFailedDialIsNotKilledByIt(t *testing.T) {
	c := newTestCore(t, "a:1")
	b, o, d := peer("b:1"), peer("c:1"), peer("d:1")
	for _, p := range []Member{b, o, d} {
		befriend(c, p)
	}
	tick := fast.Heartbeat / 4
	c.Tick(t0)
	c.Unreachable(d.ID, t0)
	c.Step(Message{Type: MsgGossip, From: o.ID, Records: []Member{accusedBy(d, o.ID.Addr)}})
	c.Heard(d.ID.Addr, t0.Add(tick))
	for now := t0.Add(tick); now.Sub(t0) < fast.SuspectAfter+fast.DeadAfter; now = now.Add(tick) {
		c.Tick(now)
		c.Step(Message{Type: MsgAck, From: b.ID})
		c.Step(Message{Type: MsgAck, From: o.ID})
		c.Ready()
		if st := statusIn(c, d.ID); st == StatusDead {
			t.Fatalf("expected a member heard after the failed dial to outlive DeadAfter; dead at %v", now.Sub(t0))
		}
	}
}

// A node that doubts itself (it hears nobody) ignores failed dials.
func TestAnIsolatedNodeIgnoresFailedDials(t *testing.T) {
	c := newTestCore(t, "a:1")
	b, o := peer("b:1"), peer("c:1")
	befriend(c, b)
	befriend(c, o)
	now := t0
	for ; now.Sub(t0) <= 2*fast.SuspectAfter; now = now.Add(fast.Heartbeat / 4) {
		c.Tick(now)
		c.Ready()
	}
	c.Unreachable(b.ID, now)
	for _, m := range c.Members() {
		if slices.Contains(m.Accusers, "a:1") {
			t.Fatalf("expected an isolated node to accuse no one on a failed dial; it accused %v", m)
		}
	}
}

// unreachableFrom tells every live node that has the victim in its view
// that a dial to it failed, as their transports do when its port refuses.
func (s *sim) unreachableFrom(victim ring.NodeID) int {
	n := 0
	for _, a := range s.order {
		x := s.nodes[a]
		if x.down || x.core.ID() == victim {
			continue
		}
		if slices.Contains(x.core.Neighbours(), victim) {
			x.core.Unreachable(victim, s.net.Now())
			s.drain(x)
			n++
		}
	}
	return n
}

// A killed member whose port refuses is dead everywhere about DeadAfter
// after the kill, not SuspectAfter + DeadAfter.
func TestAKilledMemberWhosePortRefusesIsDeadAfterDeadAfter(t *testing.T) {
	s := newSim(t, simOptions{seed: 41})
	addrs := s.cluster(5)
	victim := addrs[3]
	id := s.nodes[victim].core.ID()
	s.kill(victim)
	if n := s.unreachableFrom(id); n < 2 {
		t.Fatalf("expected at least two neighbours of the victim in a 5-node cluster; got %d", n)
	}
	d, ok := s.until(10*fast.SuspectAfter, func() bool { return s.allSee(addrs, []string{victim}, StatusDead) })
	if !ok {
		t.Fatal("expected the victim to be declared dead")
	}
	if d > fast.DeadAfter+2*fast.Heartbeat {
		t.Fatalf("expected every survivor to see the victim dead within DeadAfter (%v) and two heartbeats of the failed dials; took %v (silence alone takes %v)",
			fast.DeadAfter, d, fast.SuspectAfter+fast.DeadAfter)
	}
}

// Failed dials to a member that is alive (a flaky path, say) accuse it,
// and it refutes: two observers accusing at once, enough accusers for a
// verdict, still leave it alive everywhere at a higher incarnation, and
// nobody declares it dead.
func TestFailedDialsToALiveMemberAreRefuted(t *testing.T) {
	s := newSim(t, simOptions{seed: 42})
	addrs := s.cluster(5)
	x := s.nodes[addrs[2]].core
	before := x.Self().Incarnation
	for _, a := range addrs[3:] {
		o := s.nodes[a]
		o.core.Unreachable(x.ID(), s.net.Now())
		s.drain(o)
	}
	d, ok := s.until(20*fast.Heartbeat, func() bool {
		return s.allSee(addrs, []string{addrs[2]}, StatusAlive) && x.Self().Incarnation > before
	})
	if !ok {
		t.Fatalf("expected %s to refute the accusations and every node to see it alive at a higher incarnation; not after %v", addrs[2], d)
	}
	s.run(2 * (fast.SuspectAfter + fast.DeadAfter))
	for _, a := range addrs {
		if a != addrs[2] && s.everDeclared(a, x.ID(), StatusDead) {
			t.Errorf("expected no node to declare a member whose dials failed dead while it runs; %s did", a)
		}
	}
}
