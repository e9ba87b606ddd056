package membership

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
)

// Scenario tests: seeded clusters on the in-memory network in virtual time,
// with FastTimings (heartbeat 100 ms, suspect 500 ms, dead 500 ms, remove
// 6 s, anti-entropy 3 s, tombstones 30 s).

var fast = cluster.FastTimings()

func TestThreeNodesJoinThroughOneSeed(t *testing.T) {
	s := newSim(t, simOptions{seed: 1})
	addrs := s.cluster(3)
	for _, a := range addrs {
		if !s.nodes[a].core.Owning() {
			t.Errorf("expected %s to own actors once the cluster formed", a)
		}
	}
}

func TestJoinThroughTheCodec(t *testing.T) {
	s := newSim(t, simOptions{seed: 11, mem: MemOptions{Codec: true, MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	s.cluster(5)
}

func TestSeedsAreOnlyFirstContacts(t *testing.T) {
	s := newSim(t, simOptions{seed: 12})
	addrs := s.cluster(5)
	seed := addrs[0]
	s.kill(seed)
	late := s.start(addr(9), addrs[1])
	others := append(slices.Clone(addrs[1:]), late.addr)
	if d, ok := s.until(20*fast.Heartbeat, func() bool { return s.allSee(others, others, StatusAlive) }); !ok {
		t.Fatalf("expected a node joining through a non-first seed to be seen alive by all without the first seed; not after %v", d)
	}
}

func TestDeathIsDetectedByEverySurvivor(t *testing.T) {
	s := newSim(t, simOptions{seed: 2})
	addrs := s.cluster(5)
	victim := addrs[3]
	s.kill(victim)
	d, ok := s.until(10*fast.SuspectAfter, func() bool { return s.allSee(addrs, []string{victim}, StatusDead) })
	if !ok {
		t.Fatalf("expected every survivor to see %s dead; not after %v", victim, d)
	}
	if limit := fast.SuspectAfter + fast.DeadAfter + 3*fast.Heartbeat; d > limit {
		t.Errorf("expected detection within SuspectAfter+DeadAfter+3 heartbeats = %v; took %v", limit, d)
	}
}

func TestDeadRecordNeedsTwoAccusersInLargerClusters(t *testing.T) {
	s := newSim(t, simOptions{seed: 21})
	addrs := s.cluster(5)
	victim := addrs[2]
	id := s.nodes[victim].core.ID()
	s.kill(victim)
	if _, ok := s.until(10*fast.SuspectAfter, func() bool { return s.allSee(addrs, []string{victim}, StatusDead) }); !ok {
		t.Fatal("expected the victim to be declared dead")
	}
	m, _ := s.nodes[addrs[0]].core.Member(id)
	if len(m.Accusers) < 2 {
		t.Fatalf("expected a dead verdict to carry at least 2 accusers in a 5-node cluster; got %v", m.Accusers)
	}
}

func TestFalseSuspicionIsRefuted(t *testing.T) {
	s := newSim(t, simOptions{seed: 4})
	addrs := s.cluster(5)
	x := s.nodes[addrs[1]].core
	before := x.Self().Incarnation
	// An observer suspects x without cause (as an overloaded prober might).
	rumour := x.Self()
	rumour.Status = StatusSuspect
	rumour.Accusers = []string{addrs[4]}
	obs := s.nodes[addrs[4]]
	obs.core.Step(Message{Type: MsgGossip, From: s.nodes[addrs[3]].core.ID(), Records: []Member{rumour}})
	s.drain(obs)
	d, ok := s.until(20*fast.Heartbeat, func() bool {
		return s.allSee(addrs, []string{addrs[1]}, StatusAlive) && x.Self().Incarnation > before
	})
	if !ok {
		t.Fatalf("expected %s to refute the suspicion and every node to see it alive at a higher incarnation; not after %v", addrs[1], d)
	}
	for _, a := range addrs {
		if a != addrs[1] && s.everDeclared(a, x.ID(), StatusDead) {
			t.Errorf("expected no node to declare a refuted member dead; %s did", a)
		}
	}
}

func TestPausedShorterThanDeadAfterIsNeverDeclaredDead(t *testing.T) {
	for _, pause := range []time.Duration{fast.DeadAfter / 2, fast.DeadAfter - fast.Heartbeat/4, fast.SuspectAfter + fast.DeadAfter/2} {
		t.Run(pause.String(), func(t *testing.T) {
			s := newSim(t, simOptions{seed: 5})
			addrs := s.cluster(5)
			x := addrs[2]
			id := s.nodes[x].core.ID()
			s.pause(x)
			s.run(pause)
			s.resume(x)
			s.run(20 * fast.Heartbeat)
			for _, a := range addrs {
				if a != x && s.everDeclared(a, id, StatusDead) {
					t.Fatalf("expected a node paused for %v (< SuspectAfter+DeadAfter) never to be declared dead; %s did", pause, a)
				}
			}
			if !s.allSee(addrs, []string{x}, StatusAlive) {
				t.Fatalf("expected %s alive everywhere after it resumed", x)
			}
			for _, a := range addrs {
				for _, e := range s.nodes[a].events {
					if a == x && e.Kind == EventMemberUpdated && e.Member.ID != id && e.Member.Status >= StatusSuspect {
						t.Fatalf("expected the paused node to accuse no one after resuming; it reported %v", e.Member)
					}
				}
			}
		})
	}
}

func TestRestartWithSameAddressRejoins(t *testing.T) {
	for _, waitForDeath := range []bool{true, false} {
		name := "before death is declared"
		if waitForDeath {
			name = "after death is declared"
		}
		t.Run(name, func(t *testing.T) {
			s := newSim(t, simOptions{seed: 6})
			addrs := s.cluster(5)
			x := addrs[3]
			old := s.nodes[x].core.ID()
			s.kill(x)
			if waitForDeath {
				if _, ok := s.until(10*fast.SuspectAfter, func() bool { return s.allSee(addrs, []string{x}, StatusDead) }); !ok {
					t.Fatal("expected the killed process to be declared dead first")
				}
			}
			s.start(x, addrs[0])
			nid := s.nodes[x].core.ID()
			d, ok := s.until(20*fast.Heartbeat, func() bool {
				for _, a := range addrs {
					m, ok := s.nodes[a].core.Member(old)
					if a != x && (!ok || m.Status != StatusLeft) {
						return false
					}
				}
				return s.allSee(addrs, addrs, StatusAlive)
			})
			if !ok {
				t.Fatalf("expected the new process %v alive everywhere and the old %v left; not after %v", nid, old, d)
			}
		})
	}
}

func TestStaleAliveGossipDoesNotResurrectTheDead(t *testing.T) {
	s := newSim(t, simOptions{seed: 7})
	addrs := s.cluster(5)
	x := addrs[4]
	stale := s.nodes[x].core.Self()
	s.kill(x)
	if _, ok := s.until(10*fast.SuspectAfter, func() bool { return s.allSee(addrs, []string{x}, StatusDead) }); !ok {
		t.Fatal("expected the killed process to be declared dead first")
	}
	obs := s.nodes[addrs[0]]
	obs.core.Step(Message{Type: MsgSync, From: s.nodes[addrs[1]].core.ID(), Records: []Member{stale}})
	s.drain(obs)
	s.run(10 * fast.Heartbeat)
	if !s.allSee(addrs, []string{x}, StatusDead) {
		t.Fatalf("expected stale alive gossip about %s to leave it dead everywhere", x)
	}
}

func TestOrderlyLeave(t *testing.T) {
	s := newSim(t, simOptions{seed: 8})
	addrs := s.cluster(5)
	x := s.nodes[addrs[1]]
	if err := x.core.StartLeave(); err != nil {
		t.Fatal(err)
	}
	s.drain(x)
	if _, ok := s.until(10*fast.Heartbeat, func() bool { return s.allSee(addrs, []string{x.addr}, StatusLeaving) }); !ok {
		t.Fatal("expected every node to see the leaver as leaving")
	}
	if err := x.core.CompleteLeave(); err != nil {
		t.Fatal(err)
	}
	s.drain(x)
	if _, ok := s.until(10*fast.Heartbeat, func() bool { return s.allSee(addrs, []string{x.addr}, StatusLeft) }); !ok {
		t.Fatal("expected every node to see the leaver as left")
	}
	if !x.core.Removed() || x.core.Owning() {
		t.Fatal("expected the node that left to be removed and own nothing")
	}
	if err := x.core.StartLeave(); err != ErrRemoved {
		t.Fatalf("expected ErrRemoved from a removed core; got %v", err)
	}
}

// partitionCase checks the majority rule: the sides without a majority step
// down within DeadAfter/2 of losing it and before anyone declares them
// dead; a majority side keeps owning and is the only one that removes.
func partitionCase(t *testing.T, seed uint64, n int, groups [][]int, majority int) {
	s := newSim(t, simOptions{seed: seed})
	addrs := s.cluster(n)
	var parts [][]string
	for _, g := range groups {
		var p []string
		for _, i := range g {
			p = append(p, addrs[i])
		}
		parts = append(parts, p)
	}
	cut := s.net.Now()
	s.net.Partition(parts...)
	s.run(fast.RemoveAfter + fast.SuspectAfter + fast.DeadAfter + 5*fast.Heartbeat)
	for gi, p := range parts {
		for _, a := range p {
			n := s.nodes[a]
			if gi == majority {
				if !n.core.Owning() {
					t.Errorf("expected %s on the majority side to keep owning", a)
				}
				for _, e := range n.events {
					if e.Kind == EventStanding && !e.Owning {
						t.Errorf("expected %s on the majority side never to step down; it did at %v", a, e.At.Sub(cut))
					}
				}
				continue
			}
			var down time.Time
			for _, e := range n.events {
				if e.Kind == EventStanding && !e.Owning && e.At.After(cut) {
					down = e.At
				}
				if e.Kind == EventMemberUpdated && e.Member.Status == StatusLeft && e.At.After(cut) && e.Member.ID != n.core.ID() {
					t.Errorf("expected %s without a majority never to remove a member; it removed %v", a, e.Member.ID)
				}
			}
			if down.IsZero() || n.core.Owning() {
				t.Fatalf("expected %s without a majority to step down", a)
			}
			// It loses its majority once it suspects the far side, no later
			// than SuspectAfter (+ a tick) after the cut.
			if limit := fast.SuspectAfter + fast.DeadAfter/2 + 2*fast.Heartbeat; down.Sub(cut) > limit {
				t.Errorf("expected %s to step down within SuspectAfter+DeadAfter/2 (+2 ticks) = %v of the cut; took %v", a, limit, down.Sub(cut))
			}
			// Nobody may have declared it dead before it stepped down.
			for _, o := range addrs {
				for _, e := range s.nodes[o].events {
					if e.Kind == EventMemberUpdated && e.Member.ID == n.core.ID() && e.Member.Status == StatusDead && !e.At.After(down) {
						t.Errorf("expected %s to step down before %s declared it dead; dead at %v, down at %v", a, o, e.At.Sub(cut), down.Sub(cut))
					}
				}
			}
		}
	}
	if majority >= 0 {
		for _, a := range parts[majority] {
			for gi, p := range parts {
				if gi != majority && !s.allSee([]string{a}, p, StatusLeft) {
					t.Errorf("expected majority node %s to have removed (left) every node of group %d", a, gi)
				}
			}
		}
	}
}

func TestPartitionTwoThree(t *testing.T) {
	partitionCase(t, 31, 5, [][]int{{0, 1}, {2, 3, 4}}, 1)
}

func TestPartitionOneOneThree(t *testing.T) {
	partitionCase(t, 32, 5, [][]int{{0}, {1}, {2, 3, 4}}, 2)
}

func TestPartitionTwoTwoLeavesNoMajority(t *testing.T) {
	partitionCase(t, 33, 4, [][]int{{0, 1}, {2, 3}}, -1)
}

func TestHealedPartitionResumesOwnership(t *testing.T) {
	s := newSim(t, simOptions{seed: 34})
	addrs := s.cluster(5)
	s.net.Partition(addrs[:2], addrs[2:])
	s.run(fast.SuspectAfter + fast.DeadAfter + 2*fast.Heartbeat)
	if s.nodes[addrs[0]].core.Owning() {
		t.Fatal("expected the minority to have stepped down")
	}
	s.net.Heal()
	d, ok := s.until(20*fast.Heartbeat, func() bool {
		for _, n := range s.live() {
			if !n.core.Owning() {
				return false
			}
		}
		return s.allSee(addrs, addrs, StatusAlive)
	})
	if !ok {
		t.Fatalf("expected every node alive and owning again after healing (before RemoveAfter); not after %v", d)
	}
}

func TestThreeNodeClusterSurvivorsDeclareDeath(t *testing.T) {
	s := newSim(t, simOptions{seed: 41})
	addrs := s.cluster(3)
	s.kill(addrs[2])
	if d, ok := s.until(10*fast.SuspectAfter, func() bool { return s.allSee(addrs[:2], addrs[2:], StatusDead) }); !ok {
		t.Fatalf("expected both survivors of a 3-node cluster to declare the third dead; not after %v", d)
	}
	for _, a := range addrs[:2] {
		if !s.nodes[a].core.Owning() {
			t.Errorf("expected %s (2 of 3 alive) to keep owning", a)
		}
	}
	s.run(fast.RemoveAfter + 2*fast.Heartbeat)
	if !s.allSee(addrs[:2], addrs[2:], StatusLeft) {
		t.Fatal("expected the two survivors (a majority of 3) to remove the dead member")
	}
}

func TestThreeNodeClusterLoneSurvivorStepsDownAndAccusesNoOne(t *testing.T) {
	s := newSim(t, simOptions{seed: 42})
	addrs := s.cluster(3)
	s.kill(addrs[1])
	s.kill(addrs[2])
	s.run(fast.RemoveAfter)
	n := s.nodes[addrs[0]]
	if n.core.Owning() {
		t.Fatal("expected the lone survivor of three to step down")
	}
	if n.core.Healthy() {
		t.Fatal("expected the lone survivor, hearing nobody, to doubt itself")
	}
	for _, a := range addrs[1:] {
		if st, _ := s.status(addrs[0], a); st == StatusDead || st == StatusLeft {
			t.Errorf("expected a node that hears nobody to accuse no one; it declared %s %v", a, st)
		}
	}
}

func TestTwoNodeClusterSurvivorDecidesAlone(t *testing.T) {
	s := newSim(t, simOptions{seed: 43})
	addrs := s.cluster(2)
	s.kill(addrs[1])
	s.run(2 * fast.RemoveAfter)
	// The survivor hears nobody at all, so it cannot tell a dead peer from
	// its own isolation: it accuses no one and steps down.
	n := s.nodes[addrs[0]]
	if n.core.Owning() {
		t.Fatal("expected the survivor of two (1 of 2 is no majority) to step down")
	}
}

func TestTombstonesAreCollected(t *testing.T) {
	s := newSim(t, simOptions{seed: 9})
	addrs := s.cluster(5)
	x := s.nodes[addrs[4]].core.ID()
	s.kill(addrs[4])
	s.run(fast.SuspectAfter + fast.DeadAfter + fast.RemoveAfter + fast.TombstoneTTL + 10*fast.Heartbeat)
	for _, a := range addrs[:4] {
		if _, ok := s.nodes[a].core.Member(x); ok {
			t.Errorf("expected %s to have forgotten %v after the tombstone TTL", a, x)
		}
		if got := len(s.nodes[a].core.Members()); got != 4 {
			t.Errorf("expected %s's table to hold the 4 live members; got %d", a, got)
		}
	}
}

func TestOverlayViewsStayBounded(t *testing.T) {
	s := newSim(t, simOptions{seed: 10})
	addrs := s.cluster(40)
	s.run(3 * fast.AntiEntropy)
	for _, a := range addrs {
		c := s.nodes[a].core
		if len(c.active) > c.cfg.ActiveView || len(c.passive) > c.cfg.PassiveView {
			t.Errorf("expected views bounded by %d/%d; %s has %d/%d", c.cfg.ActiveView, c.cfg.PassiveView, a, len(c.active), len(c.passive))
		}
		if len(c.active) == 0 {
			t.Errorf("expected %s to have neighbours", a)
		}
	}
}

func TestLossyNetworkStillConverges(t *testing.T) {
	s := newSim(t, simOptions{seed: 13, mem: MemOptions{DropRate: 0.05, MinDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}})
	addrs := s.cluster(10)
	s.kill(addrs[7])
	if d, ok := s.until(20*fast.SuspectAfter, func() bool { return s.allSee(addrs, addrs[7:8], StatusDead) }); !ok {
		t.Fatalf("expected the death to be seen everywhere despite 5%% loss; not after %v", d)
	}
	for _, a := range addrs {
		if a == addrs[7] {
			continue
		}
		for _, b := range addrs {
			if b != addrs[7] && s.everDeclared(a, s.nodes[b].core.ID(), StatusDead) {
				t.Errorf("expected no false death under 5%% loss; %s declared %s dead", a, b)
			}
		}
	}
}

func TestSameSeedSameTrace(t *testing.T) {
	trace := func() []string {
		s := newSim(t, simOptions{seed: 99, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 9 * time.Millisecond, DropRate: 0.02}})
		addrs := s.cluster(6)
		s.kill(addrs[5])
		s.run(2 * time.Second)
		var out []string
		for _, a := range addrs {
			for _, e := range s.nodes[a].events {
				out = append(out, a+" "+e.At.String()+" "+e.Kind.String()+" "+e.Member.String())
			}
		}
		return out
	}
	a, b := trace(), trace()
	if !slices.Equal(a, b) {
		t.Fatalf("expected two runs with one seed to produce one trace; got %d and %d events", len(a), len(b))
	}
}

func TestRemovedMinorityLearnsItOnHealAndRejoinsAfterRestart(t *testing.T) {
	s := newSim(t, simOptions{seed: 35})
	addrs := s.cluster(5)
	minority := addrs[:2]
	s.net.Partition(minority, addrs[2:])
	if _, ok := s.until(fast.RemoveAfter+fast.SuspectAfter+fast.DeadAfter+10*fast.Heartbeat, func() bool {
		return s.allSee(addrs[2:], minority, StatusLeft)
	}); !ok {
		t.Fatal("expected the majority to remove the minority")
	}
	s.net.Heal()
	if d, ok := s.until(20*fast.Heartbeat, func() bool {
		return s.nodes[minority[0]].core.Removed() && s.nodes[minority[1]].core.Removed()
	}); !ok {
		t.Fatalf("expected removed processes to learn it once the partition heals; not after %v", d)
	}
	for _, a := range minority {
		s.kill(a)
		s.start(a, addrs[2])
	}
	if d, ok := s.until(20*fast.Heartbeat, func() bool { return s.allSee(addrs, addrs, StatusAlive) }); !ok {
		t.Fatalf("expected the restarted processes to rejoin; not after %v", d)
	}
}

// Found by TestRandomFaultsThenHealConverge: every other process restarts
// while one node is paused, so the survivor knows only identities that no
// longer exist and the new processes do not know it. Messages it sends to
// the old identities must lead it to the new ones.
func TestNodeHoldingOnlyStaleIdentitiesFindsTheRestartedCluster(t *testing.T) {
	s := newSim(t, simOptions{seed: 0, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}})
	addrs := s.cluster(3)
	s.kill(addrs[0])
	s.kill(addrs[1])
	s.pause(addrs[2])
	s.run(fast.Heartbeat)
	s.start(addrs[0], addrs[1])
	s.start(addrs[1], addrs[0])
	s.run(5 * fast.Heartbeat)
	s.resume(addrs[2])
	d, ok := s.until(2*fast.AntiEntropy, func() bool {
		for _, a := range addrs {
			if !s.nodes[a].core.Owning() {
				return false
			}
		}
		return s.allSee(addrs, addrs, StatusAlive)
	})
	if !ok {
		t.Fatalf("expected the paused survivor and the restarted processes to form one cluster; not after %v: %v", d, s.nodes[addrs[2]].core.Members())
	}
}

func TestJoinersCannotGrowAMinorityIntoAMajority(t *testing.T) {
	s := newSim(t, simOptions{seed: 36})
	addrs := s.cluster(5)
	minority := addrs[:2]
	joiners := []string{addr(10), addr(11), addr(12)}
	s.net.Partition(append(slices.Clone(minority), joiners...), addrs[2:])
	s.run(fast.SuspectAfter + fast.DeadAfter)
	for _, j := range joiners {
		s.start(j, minority...)
	}
	s.run(2 * fast.AntiEntropy)
	for _, a := range minority {
		c := s.nodes[a].core
		if c.Owning() {
			t.Fatalf("expected %s to stay stepped down while cut off from the majority; it owns with member set %v", a, c.MemberSet())
		}
		for _, j := range joiners {
			if _, ok := c.Member(s.nodes[j].core.ID()); ok {
				t.Errorf("expected %s (no majority) not to admit the joiner %s", a, j)
			}
		}
	}
	// Heal. By now the majority has removed the pair; their runtimes
	// restart them, and the joiners, still asking them, get in.
	s.net.Heal()
	if _, ok := s.until(20*fast.Heartbeat, func() bool {
		return s.nodes[minority[0]].core.Removed() && s.nodes[minority[1]].core.Removed()
	}); !ok {
		t.Fatal("expected the pair to learn it was removed once the partition heals")
	}
	for _, a := range minority {
		s.kill(a)
		s.start(a, addrs[2])
	}
	all := append(slices.Clone(addrs), joiners...)
	if d, ok := s.until(2*fast.AntiEntropy, func() bool { return s.allSee(all, all, StatusAlive) }); !ok {
		t.Fatalf("expected the joiners to be admitted once their seeds are back in the majority; not after %v", d)
	}
}

func TestEvenSplitHealsWithoutRemovals(t *testing.T) {
	s := newSim(t, simOptions{seed: 37})
	addrs := s.cluster(4)
	s.net.Partition(addrs[:2], addrs[2:])
	s.run(2 * fast.RemoveAfter)
	for _, a := range addrs {
		if s.nodes[a].core.Owning() {
			t.Fatalf("expected no node to own during a 2|2 split; %s does", a)
		}
	}
	s.net.Heal()
	if d, ok := s.until(20*fast.Heartbeat, func() bool {
		for _, a := range addrs {
			if !s.nodes[a].core.Owning() {
				return false
			}
		}
		return s.allSee(addrs, addrs, StatusAlive)
	}); !ok {
		t.Fatalf("expected a 2|2 split, where nobody could remove anyone, to heal into one owning cluster; not after %v", d)
	}
}

// Found by TestRandomFaultsThenHealConverge (5 nodes, seed 10): a pair
// whose majority view was 0.4 s stale, because a partition had just cut
// it from a third node, removed two members; the far side never learned
// it, and later both sides owned with a majority of different member
// sets. Removal now also needs every neighbour heard within two
// heartbeats.
func TestNoRemovalThroughAStaleMajorityView(t *testing.T) {
	s := newSim(t, simOptions{seed: 0xa, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}})
	a := s.cluster(5)
	s.net.Partition(a[:3], a[3:])
	s.run(3 * fast.Heartbeat)
	s.net.SetDropRate(0.05)
	s.run(21 * fast.Heartbeat)
	s.net.SetDropRate(0)
	s.net.Partition(a[:2], a[2:])
	s.run(30 * fast.Heartbeat)
	s.net.Partition(a[:3], a[3:])
	s.run(66 * fast.Heartbeat)
	s.net.Partition(a[:2], a[2:])
	s.run(81 * fast.Heartbeat)
	var owners []string
	for _, x := range a {
		if s.nodes[x].core.Owning() {
			owners = append(owners, x)
		}
	}
	if !slices.Equal(owners, a[2:]) {
		t.Fatalf("expected only the side of three to own after the last split; owners are %v", owners)
	}
}

// leaveInOrder has the node at a leave as a system member does: leaving,
// a hand-over, left; announced says whether its last messages go out.
// Then its process ends.
func (s *sim) leaveInOrder(t *testing.T, a string, announced bool) {
	t.Helper()
	x := s.nodes[a]
	if err := x.core.StartLeave(); err != nil {
		t.Fatal(err)
	}
	s.drain(x)
	s.run(3 * fast.Heartbeat) // the hand-over
	if err := x.core.CompleteLeave(); err != nil {
		t.Fatal(err)
	}
	if announced {
		s.drain(x)
	} else {
		x.core.Ready() // its last messages never leave
	}
	s.run(fast.Heartbeat)
	s.kill(a)
}

// keepOwning fails the test if one of the nodes at addrs steps down
// within a while (past removal of the dead).
func (s *sim) keepOwning(t *testing.T, addrs []string) {
	t.Helper()
	limit := 4 * (fast.SuspectAfter + fast.DeadAfter + fast.RemoveAfter)
	if d, ok := s.until(limit, func() bool {
		for _, a := range addrs {
			if !s.nodes[a].core.Owning() {
				return true
			}
		}
		return false
	}); ok {
		t.Fatalf("expected %v to keep owning; one stepped down %v after the leave", addrs, d)
	}
}

// A member that left leaves the majority's denominator: two of four left
// in order, and the other two, a majority of two, keep owning.
func TestMembersThatLeftInOrderLeaveTheMajority(t *testing.T) {
	s := newSim(t, simOptions{seed: 31})
	addrs := s.cluster(4)
	s.leaveInOrder(t, addrs[3], true)
	s.leaveInOrder(t, addrs[2], true)
	s.keepOwning(t, addrs[:2])
	if !s.allSee(addrs[:2], addrs[2:], StatusLeft) {
		t.Fatal("expected the survivors to see both leavers left")
	}
}

// A leaver whose left record is lost looks like a member that died: two
// survivors of three keep their majority and declare it dead.
func TestSurvivorsOfALeaveWhoseRecordWasLostKeepOwning(t *testing.T) {
	s := newSim(t, simOptions{seed: 32})
	addrs := s.cluster(3)
	s.leaveInOrder(t, addrs[2], false)
	s.keepOwning(t, addrs[:2])
	if !s.allSee(addrs[:2], addrs[2:], StatusDead) && !s.allSee(addrs[:2], addrs[2:], StatusLeft) {
		t.Fatal("expected the survivors to see the leaver dead, or left")
	}
}
