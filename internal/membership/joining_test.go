package membership

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/troupe-go/troupe/cluster"
)

func seededCore(t *testing.T, a string, seeds ...string) *Core {
	t.Helper()
	cfg := cluster.FastConfig(a)
	cfg.Seeds = seeds
	c, err := NewCore(cfg, 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAHeldRecordSaysJoiningUntilMarkReadyAndTheJoinAndAMajority(t *testing.T) {
	c := seededCore(t, "a:1", "b:1")
	c.HoldUntilReady()
	c.Tick(t0)
	r := c.Ready()
	if len(r.Messages) != 1 || len(r.Messages[0].Msg.Records) != 1 || !r.Messages[0].Msg.Records[0].Joining {
		t.Fatalf("expected the join to the seed to carry a record that says Joining; got %+v", r.Messages)
	}
	if err := c.MarkReady(); err != nil {
		t.Fatal(err)
	}
	if !c.Self().Joining {
		t.Fatal("expected a node that has not joined to keep saying Joining after MarkReady")
	}
	b := peer("b:1")
	c.Step(Message{Type: MsgJoinReply, From: b.ID, Records: []Member{b}})
	self := c.Self()
	if self.Joining || self.Incarnation != 1 {
		t.Fatalf("expected the record to stop saying Joining at incarnation 1 once joined, ready and owning; got %v", self)
	}
	var announced, event bool
	for _, env := range c.Ready().Messages {
		for _, rec := range env.Msg.Records {
			announced = announced || (rec.ID == self.ID && !rec.Joining)
		}
	}
	if !announced {
		t.Fatal("expected the ready record to be pushed to the peers at once")
	}
	// A peer that learns it raises an event, so its placement follows at once.
	p := newTestCore(t, "b:1")
	joining := self
	joining.Incarnation, joining.Joining = 0, true
	p.Step(Message{Type: MsgGossip, From: self.ID, Records: []Member{joining}})
	p.Ready()
	p.Step(Message{Type: MsgGossip, From: self.ID, Records: []Member{self}})
	for _, e := range p.Ready().Events {
		event = event || (e.Kind == EventMemberUpdated && e.Member.ID == self.ID && !e.Member.Joining)
	}
	if !event {
		t.Fatal("expected a peer to raise EventMemberUpdated when a member stops saying Joining")
	}
}

func TestARecordNeverSaysJoiningWithoutHoldUntilReady(t *testing.T) {
	c := seededCore(t, "a:1", "b:1")
	c.Tick(t0)
	if c.Self().Joining {
		t.Fatal("expected no Joining flag on a core the runtime does not gate")
	}
}

// A node listed among its own seeds (every member started with one seed
// list) never forms a cluster alone: alone, it would own every key while
// the others may own them too (it was cut off from them, or restarted while
// they run). It asks the others every Heartbeat and starts a cluster with
// the first that joins it.
func TestANodeAmongItsOwnSeedsNeverFormsAClusterAlone(t *testing.T) {
	c := seededCore(t, "a:1", "a:1", "b:1", "c:1")
	joins := 0
	const rounds = 40
	for i := range rounds {
		c.Tick(t0.Add(time.Duration(i) * fast.Heartbeat))
		for _, env := range c.Ready().Messages {
			if env.Msg.Type == MsgJoin {
				joins++
			}
		}
	}
	if c.Joined() || c.Owning() {
		t.Fatalf("expected a node whose other seeds never answered to stay out of any cluster and own nothing after %v", rounds*fast.Heartbeat)
	}
	if joins < 2*rounds {
		t.Fatalf("expected joins to both other seeds every heartbeat; saw %d in %d heartbeats", joins, rounds)
	}
	b := peer("b:1")
	c.Step(Message{Type: MsgJoin, From: b.ID, Records: []Member{b}})
	var replied bool
	for _, env := range c.Ready().Messages {
		replied = replied || (env.Msg.Type == MsgJoinReply && env.To == "b:1")
	}
	if !replied {
		t.Fatal("expected the node to admit the first seed that joins it, so that nodes seeding each other start a cluster")
	}
}

func TestANodeWhoseSeedsAreAllOthersNeverFormsAClusterAlone(t *testing.T) {
	c := seededCore(t, "a:1", "b:1")
	for now := t0; now.Sub(t0) <= 10*fast.SuspectAfter; now = now.Add(fast.Heartbeat) {
		c.Tick(now)
		c.Ready()
	}
	if c.Joined() {
		t.Fatal("expected a node not listed among its seeds to wait for them (and its join to time out) rather than form a cluster alone")
	}
}

func TestAJoinedNodeProbesKnownAddressesWhereItKnowsNoLiveProcess(t *testing.T) {
	c := seededCore(t, "b:1", "a:1")
	a, d := peer("a:1"), peer("d:1")
	c.Step(Message{Type: MsgJoinReply, From: a.ID, Records: []Member{a, d}})
	c.Ready()
	deadA := a
	deadA.Status = StatusLeft
	c.Step(Message{Type: MsgGossip, From: d.ID, Records: []Member{deadA}})
	c.Ready()
	probes := map[string]int{}
	for now := t0; now.Sub(t0) < 4*fast.SuspectAfter; now = now.Add(fast.Heartbeat / 4) {
		c.Tick(now)
		c.Step(Message{Type: MsgAck, From: d.ID}) // d stays alive
		for _, env := range c.Ready().Messages {
			if env.Msg.Type == MsgSync && env.Msg.To.IsZero() {
				probes[env.To]++
				if len(env.Msg.Records) < 2 {
					t.Fatalf("expected a probe to carry the whole table; got %v", env.Msg.Records)
				}
			}
		}
	}
	if probes["d:1"] != 0 {
		t.Fatalf("expected no probe to an address with a live process; got %v", probes)
	}
	if n := probes["a:1"]; n < 3 || n > 5 {
		t.Fatalf("expected the seed's address, where only a left record lives, probed once per SuspectAfter (4 times in 4×SuspectAfter); got %v", probes)
	}
}

// Current lists, for any table, one record per address: that of the
// newest process, unless it left.
func TestCurrentListsTheNewestLiveProcessOfEachAddress(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		recs := rapid.SliceOfN(genMemberFor(genID()), 0, 12).Draw(t, "records")
		got := Current(recs)
		newest := map[string]Member{}
		for _, m := range recs {
			if o, ok := newest[m.ID.Addr]; !ok || o.ID.Incarnation < m.ID.Incarnation {
				newest[m.ID.Addr] = m
			}
		}
		var want []Member
		for _, m := range newest {
			if m.Status != StatusLeft {
				want = append(want, m)
			}
		}
		slices.SortFunc(want, func(a, b Member) int { return a.ID.Compare(b.ID) })
		if len(got) != len(want) {
			t.Fatalf("expected %v; got %v", want, got)
		}
		for i := range got {
			if got[i].ID != want[i].ID {
				t.Fatalf("expected %v; got %v", want, got)
			}
		}
	})
}

// Whenever a member restarts alone (without seeds) at an address the
// others know, as their seed or from their tables, before its tombstone
// is forgotten, the two clusters merge: every node sees every current
// process alive, whatever the timing and the random choices.
func TestAMemberRestartedAloneAtAKnownAddressMergesBack(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		n := rapid.IntRange(2, 5).Draw(rt, "n")
		victim := rapid.IntRange(0, n-1).Draw(rt, "victim")
		down := time.Duration(rapid.IntRange(1, 20).Draw(rt, "down_s")) * time.Second
		s := newSim(t, simOptions{seed: seed, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
		addrs := s.cluster(n)
		s.kill(addrs[victim])
		s.run(down) // within RemoveAfter + TombstoneTTL (36 s) of the kill
		s.start(addrs[victim])
		if d, ok := s.until(5*time.Second, func() bool { return s.allSee(addrs, addrs, StatusAlive) }); !ok {
			rt.Fatalf("expected the restarted %s (down %v) and the others to merge; not after %v", addrs[victim], down, d)
		}
	})
}

// The split a node forming alone would make: three nodes seeded with one
// list, {a} cut off from {b, c}, a restarted with its usual command. The
// restarted a must own nothing while b and c own every key; it joins them
// once the cut heals.
func TestASeedRestartedInsideAMinorityOwnsNothing(t *testing.T) {
	s := newSim(t, simOptions{seed: 3, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	a, b, c := addr(0), addr(1), addr(2)
	for _, x := range []string{a, b, c} {
		s.start(x, a, b, c)
	}
	all := []string{a, b, c}
	if d, ok := s.until(10*time.Second, func() bool { return s.allSee(all, all, StatusAlive) }); !ok {
		t.Fatalf("expected the three to form a cluster; not after %v", d)
	}
	s.net.Partition([]string{a}, []string{b, c})
	s.kill(a)
	s.start(a, a, b, c)
	for i := range 40 {
		s.run(fast.SuspectAfter / 4)
		if n := s.nodes[a].core; n.Owning() || n.Joined() {
			t.Fatalf("after %v: the restarted seed cut off from the others joined or owns (joined %v, owning %v)", time.Duration(i+1)*fast.SuspectAfter/4, n.Joined(), n.Owning())
		}
	}
	if !s.nodes[b].core.Owning() || !s.nodes[c].core.Owning() {
		t.Fatal("expected the majority side to own")
	}
	s.net.Heal()
	if d, ok := s.until(20*time.Second, func() bool { return s.allSee(all, all, StatusAlive) && s.nodes[a].core.Owning() }); !ok {
		t.Fatalf("expected the restarted seed to join the others once the cut healed; not after %v", d)
	}
}

// A node that joined through a minority (its join-reply shows two of the
// three other members dead) stays Joining after MarkReady: members that
// cannot see a majority must not be placed on.
func TestAJoinedNodeWithoutAMajorityStaysJoining(t *testing.T) {
	c := seededCore(t, "a:1", "b:1")
	c.HoldUntilReady()
	c.Tick(t0)
	c.Ready()
	b, d, e := peer("b:1"), peer("d:1"), peer("e:1")
	d.Status, e.Status = StatusDead, StatusDead
	c.Step(Message{Type: MsgJoinReply, From: b.ID, Records: []Member{b, d, e}})
	c.Ready()
	if err := c.MarkReady(); err != nil {
		t.Fatal(err)
	}
	c.Ready()
	if !c.Joined() {
		t.Fatal("expected the node to have joined through b")
	}
	if c.Owning() || !c.Self().Joining {
		t.Fatalf("expected a node that sees 2 of 4 members alive to own nothing and keep saying Joining; owning %v, record %v", c.Owning(), c.Self())
	}
}

// Members started together with one seed list each join whichever seed
// answers first, so for a while each knows only some of the others. The
// rings placement builds must still grow from one member: exactly one
// member (the smallest address of the list) takes keys while it knows no
// other member that does, and every other one becomes ready only once it
// knows a member that already is. Without the rule two members could
// each take every key on a ring of their own (two quorums of one: the
// chaos test's paused-owner run read 0 after a write was acknowledged).
func TestMembersStartedTogetherAgreeOnOneFirstRing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		n := rapid.IntRange(2, 6).Draw(rt, "n")
		s := newSim(t, simOptions{seed: seed, gate: true, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}})
		addrs := make([]string, n)
		for i := range addrs {
			addrs[i] = addr(n - 1 - i) // the smallest address starts last
		}
		var alone []string
		s.onReady = func(nd *simNode) {
			if !nd.core.seesPlacedMember() {
				alone = append(alone, nd.addr)
			}
		}
		for i, a := range addrs {
			seeds := slices.Clone(addrs)
			rand := rapid.Permutation(seeds).Draw(rt, "order"+a) // any order in each member's list
			s.start(a, rand...)
			if gap := rapid.IntRange(0, 30).Draw(rt, "gap"+a); gap > 0 && i < n-1 {
				s.run(time.Duration(gap) * time.Millisecond)
			}
		}
		allReady := func() bool {
			for _, a := range addrs {
				if !s.nodes[a].ready {
					return false
				}
			}
			return true
		}
		if d, ok := s.until(20*time.Second, allReady); !ok {
			rt.Fatalf("expected every member ready; not after %v", d)
		}
		if len(alone) != 1 || alone[0] != slices.Min(addrs) {
			rt.Fatalf("expected only %s, the smallest seed, to take keys knowing no member that did; got %v", slices.Min(addrs), alone)
		}
	})
}

func TestOnlyTheSmallestOfASeedListThatNamesItMayFoundACluster(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		seeds []string
		want  bool
	}{
		{"a:1", nil, true},
		{"a:1", []string{"a:1"}, true},
		{"a:1", []string{"c:1", "a:1", "b:1"}, true},
		{"b:1", []string{"c:1", "a:1", "b:1"}, false},
		{"a:1", []string{"b:1"}, false}, // every member lists only the others: none founds
		{"b:1", []string{"a:1"}, false},
	} {
		if got := mayFound(tc.addr, tc.seeds); got != tc.want {
			t.Errorf("mayFound(%s, %v) = %v; want %v", tc.addr, tc.seeds, got, tc.want)
		}
	}
}

// A minority must not grow into a majority of its own member set with
// members it never knew: five members split {a, b} | {c, d, e}, the
// majority admits f and g (seven members), then two new processes h and
// i, cut off with the minority, seek it out through a. Taking them in
// would make a and b see 4 of 7 alive, owning keys that c to g own too.
func TestAMinorityTakesInNoNewMemberBySync(t *testing.T) {
	s := newSim(t, simOptions{seed: 7, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	a, b, c, d, e, f, g, h, i := addr(0), addr(1), addr(2), addr(3), addr(4), addr(5), addr(6), addr(7), addr(8)
	first := []string{a, b, c, d, e}
	for _, x := range first {
		s.start(x, a, b, c)
	}
	if dur, ok := s.until(10*time.Second, func() bool { return s.allSee(first, first, StatusAlive) }); !ok {
		t.Fatalf("expected the five to form a cluster; not after %v", dur)
	}
	s.net.Partition([]string{a, b}, []string{c, d, e, f, g})
	if dur, ok := s.until(10*time.Second, func() bool {
		return !s.nodes[a].core.Owning() && !s.nodes[b].core.Owning() && s.nodes[c].core.Owning()
	}); !ok {
		t.Fatalf("expected the minority to step down; not after %v", dur)
	}
	s.start(f, c)
	s.start(g, c)
	major := []string{c, d, e, f, g}
	if dur, ok := s.until(10*time.Second, func() bool { return s.allSee(major, major, StatusAlive) }); !ok {
		t.Fatalf("expected the majority to admit f and g; not after %v", dur)
	}
	s.net.Partition([]string{a, b, h, i}, major)
	s.start(h, a)
	s.start(i, a)
	for step := range 40 {
		s.run(fast.SuspectAfter / 4)
		for _, x := range []string{a, b, h, i} {
			if s.nodes[x].core.Owning() {
				t.Fatalf("after %v: %s owns, on the minority side of a seven-member cluster", time.Duration(step+1)*fast.SuspectAfter/4, x)
			}
		}
	}
	for _, m := range s.nodes[a].core.Members() {
		if m.ID.Addr == h || m.ID.Addr == i {
			t.Fatalf("the minority's a took in %s, a process it never knew", m.ID)
		}
	}
	s.net.Heal()
	all := []string{a, b, c, d, e, f, g, h, i}
	if dur, ok := s.until(30*time.Second, func() bool { return s.allSee(all, all, StatusAlive) }); !ok {
		t.Fatalf("expected all nine alive once the cut healed; not after %v", dur)
	}
}
