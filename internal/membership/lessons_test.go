package membership

import (
	"fmt"
	"slices"
	"testing"
)

// Tests for lessons other membership libraries learned in production
// (docs/lessons.md): confirmations that never apply in small clusters,
// nodes that cannot rejoin after leaving or after being declared dead at
// a higher incarnation.

// With three members memberlist's suspicion confirmations never applied
// (k = n − 2 is below what is needed). Here, in clusters of 3 and 5, one
// observer that stops hearing a member (a broken link, or an overloaded
// prober) suspects it but never declares it dead on its own word, however
// long the silence; a second observer's accusation completes the verdict.
func TestALoneAccuserDoesNotDeclareDeathWhileAnotherObserverCouldConfirm(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			c := newTestCore(t, "a:1")
			victim := peer("v:1")
			var others []Member
			for i := range n - 2 {
				others = append(others, peer(fmt.Sprintf("o%d:1", i)))
			}
			for _, p := range append([]Member{victim}, others...) {
				befriend(c, p)
			}
			tick := fast.Heartbeat / 4
			now := t0
			step := func() {
				now = now.Add(tick)
				c.Tick(now)
				for _, o := range others { // the rest of the cluster is heard as usual
					c.Heard(o.ID.Addr, now)
					c.Step(Message{Type: MsgAck, From: o.ID})
				}
				for _, e := range c.Ready().Events {
					if e.Kind == EventMemberUpdated && e.Member.ID == victim.ID && e.Member.Status == StatusDead && !slices.Contains(e.Member.Accusers, others[0].ID.Addr) {
						t.Fatalf("declared %v dead on the word of %v alone, at +%v", victim.ID, e.Member.Accusers, now.Sub(t0))
					}
				}
			}
			for now.Sub(t0) < 10*(fast.SuspectAfter+fast.DeadAfter) {
				step()
			}
			m, _ := c.Member(victim.ID)
			if m.Status != StatusSuspect || !slices.Equal(m.Accusers, []string{"a:1"}) {
				t.Fatalf("after a long silence of %v heard by this node alone: %v, want suspect accused by a:1 only", victim.ID, m)
			}
			if !c.Healthy() || !c.Owning() {
				t.Fatal("the observer, hearing the rest of the cluster, should stay healthy and owning")
			}
			// A second observer confirms: the verdict follows at once.
			rumour := m.Clone()
			rumour.Accusers = []string{others[0].ID.Addr}
			c.Step(Message{Type: MsgGossip, From: others[0].ID, Records: []Member{rumour}})
			c.Ready()
			for range 2 {
				step()
			}
			if m, _ := c.Member(victim.ID); m.Status != StatusDead {
				t.Fatalf("after a second accuser: %v, want dead", m)
			}
		})
	}
}

// Proto.Actor's members that left "may never rejoin". A member that left
// in order restarts at the same address (a new process incarnation) while
// every other node still holds its left record: it joins, is alive
// everywhere, and the old process stays left.
func TestAMemberThatLeftInOrderRejoinsAtTheSameAddress(t *testing.T) {
	s := newSim(t, simOptions{seed: 61})
	addrs := s.cluster(5)
	x := s.nodes[addrs[2]]
	old := x.core.ID()
	if err := x.core.StartLeave(); err != nil {
		t.Fatal(err)
	}
	s.drain(x)
	if err := x.core.CompleteLeave(); err != nil {
		t.Fatal(err)
	}
	s.drain(x)
	if _, ok := s.until(10*fast.Heartbeat, func() bool { return s.allSee(addrs, []string{x.addr}, StatusLeft) }); !ok {
		t.Fatal("expected every node to see the leaver as left")
	}
	s.kill(x.addr)
	s.start(x.addr, addrs[0])
	d, ok := s.until(20*fast.Heartbeat, func() bool { return s.allSee(addrs, addrs, StatusAlive) })
	if !ok {
		t.Fatalf("expected the restarted member alive everywhere (the left record of its previous process in every table); not after %v", d)
	}
	for _, a := range addrs {
		if a == x.addr {
			continue
		}
		if m, _ := s.nodes[a].core.Member(old); m.Status != StatusLeft {
			t.Errorf("%s: the previous process %v is %v, want left", a, old, m.Status)
		}
	}
}

// memberlist could not take back a restarted node while the cluster held
// it dead at a higher incarnation than the new process announces. Here
// the old process refuted false suspicions several times (its membership
// incarnation rose) before it crashed and was declared dead; the new
// process at the same address starts again from the lowest incarnation
// and is alive everywhere, because the process incarnation in its
// identity tells it apart.
func TestARestartedMemberRejoinsThoughItsDeadRecordHasAHigherIncarnation(t *testing.T) {
	s := newSim(t, simOptions{seed: 62})
	addrs := s.cluster(5)
	x := s.nodes[addrs[3]]
	obs := s.nodes[addrs[0]]
	for range 3 {
		before := x.core.Self().Incarnation
		rumour := x.core.Self()
		rumour.Status = StatusSuspect
		rumour.Accusers = []string{obs.addr}
		obs.core.Step(Message{Type: MsgGossip, From: s.nodes[addrs[1]].core.ID(), Records: []Member{rumour}})
		s.drain(obs)
		if _, ok := s.until(20*fast.Heartbeat, func() bool { return x.core.Self().Incarnation > before }); !ok {
			t.Fatal("expected the member to refute the suspicion")
		}
	}
	old := x.core.ID()
	raised := x.core.Self().Incarnation
	s.kill(x.addr)
	if _, ok := s.until(10*fast.SuspectAfter, func() bool { return s.allSee(addrs, []string{x.addr}, StatusDead) }); !ok {
		t.Fatal("expected the crashed process to be declared dead")
	}
	if m, _ := obs.core.Member(old); m.Incarnation < raised {
		t.Fatalf("dead record %v below the incarnation %d the process reached", m, raised)
	}
	s.start(x.addr, addrs[0])
	if got := x.core.Self().Incarnation; got >= raised {
		t.Fatalf("the new process starts at incarnation %d, want below the dead record's %d for the test to mean anything", got, raised)
	}
	if d, ok := s.until(20*fast.Heartbeat, func() bool { return s.allSee(addrs, addrs, StatusAlive) }); !ok {
		t.Fatalf("expected the restarted member alive everywhere; not after %v", d)
	}
}
