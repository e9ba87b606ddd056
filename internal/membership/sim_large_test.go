package membership

import (
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/ring"
)

// Large simulations on the in-memory network, in virtual time. The sizes
// and the figures they log are the ones reported in docs/membership.md.

// simSize returns the cluster size for the large simulation: 200 by
// default (100 with -short) so the package stays fast under -race; set
// TROUPE_SIM_NODES=1000 for the full-size run.
func simSize(t *testing.T) int {
	if v := os.Getenv("TROUPE_SIM_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			t.Fatalf("TROUPE_SIM_NODES=%q: want a number >= 3", v)
		}
		return n
	}
	if testing.Short() {
		return 100
	}
	return 200
}

// bootLarge starts n nodes that already know each other (their tables are
// preloaded, as after a long-settled join; joining itself is measured by
// the fifty-node test and the join below), then lets the overlay form.
func bootLarge(t *testing.T, s *sim, n int) []string {
	t.Helper()
	var addrs []string
	for i := range n {
		addrs = append(addrs, addr(i))
		s.start(addrs[i])
	}
	recs := make([]Member, n)
	for i, a := range addrs {
		recs[i] = s.nodes[a].core.Self()
	}
	for _, a := range addrs {
		preload(s.nodes[a].core, recs)
	}
	s.run(20 * fast.Heartbeat)
	if !s.allSee(addrs, addrs, StatusAlive) {
		t.Fatalf("expected %d preloaded nodes to stay all alive while the overlay forms", n)
	}
	return addrs
}

// preload installs records without gossiping them.
func preload(c *Core, recs []Member) {
	for _, r := range recs {
		if r.ID == c.self.ID {
			continue
		}
		for _, ch := range c.table.Apply(r) {
			c.account(ch.Prev, ch.Cur, ch.IsNew)
			c.since[ch.Cur.ID] = c.now
		}
	}
	c.memberSetDirty = true
}

type convergence struct {
	time   time.Duration
	rounds float64
}

func (c convergence) String() string {
	return c.time.String() + " (" + strconv.FormatFloat(c.rounds, 'f', 1, 64) + " heartbeat rounds)"
}

func TestSimulationConvergesAfterJoinAndDeath(t *testing.T) {
	n := simSize(t)
	for _, lazy := range []bool{false, true} {
		name := "eager"
		if lazy {
			name = "lazy"
		}
		t.Run(name, func(t *testing.T) {
			s := newSim(t, simOptions{
				seed: 1000, tick: fast.Heartbeat,
				mem:    MemOptions{MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
				config: func(c *Config) { c.LazyGossip = lazy },
			})
			start := time.Now()
			addrs := bootLarge(t, s, n)
			bootWall := time.Since(start)

			// Join: one more node through a random member.
			joiner := addr(n)
			s.start(joiner, addrs[n/2])
			all := append(addrs, joiner)
			d, ok := s.untilStep(30*fast.AntiEntropy, 5*time.Millisecond, func() bool { return s.allSee(all, []string{joiner}, StatusAlive) })
			if !ok {
				t.Fatalf("expected all %d nodes to see the joiner; not after %v", n, d)
			}
			join := convergence{d, float64(d) / float64(fast.Heartbeat)}

			// Death: kill one node; measure first verdict and full spread.
			victim := addrs[n/3]
			vid := s.nodes[victim].core.ID()
			killed := s.net.Now()
			s.kill(victim)
			d, ok = s.untilStep(30*fast.AntiEntropy, 5*time.Millisecond, func() bool { return s.allSee(all, []string{victim}, StatusDead) })
			if !ok {
				t.Fatalf("expected all survivors to see the victim dead; not after %v", d)
			}
			var first time.Time
			for _, a := range all {
				for _, e := range s.nodes[a].events {
					if e.Kind == EventMemberUpdated && e.Member.ID == vid && e.Member.Status == StatusDead && (first.IsZero() || e.At.Before(first)) {
						first = e.At
					}
				}
			}
			spread := s.net.Now().Sub(first)
			death := convergence{d, float64(spread) / float64(fast.Heartbeat)}
			expect := 3 * math.Log2(float64(n))
			t.Logf("N=%d gossip=%s boot(wall)=%v join: all see the joiner after %v; death: first dead verdict %v after kill, all see dead %v after kill, spread %v = %.1f rounds (3*log2 N = %.1f)",
				n, name, bootWall.Round(time.Millisecond), join, first.Sub(killed), d, spread, death.rounds, expect)
			if join.rounds > expect || death.rounds > expect {
				t.Errorf("expected convergence within 3*log2(N) = %.1f heartbeat rounds; join took %.1f, death spread %.1f", expect, join.rounds, death.rounds)
			}
			for _, a := range all {
				if a == victim {
					continue
				}
				for _, b := range all {
					if b != victim && b != a && s.everDeclared(a, s.nodes[b].core.ID(), StatusDead) {
						t.Fatalf("expected no false death in the simulation; %s declared %s dead", a, b)
					}
				}
			}
			st := s.net.Stats()
			t.Logf("messages sent %d, per node per virtual second %.1f", st.Sent, float64(st.Sent)/float64(len(all))/s.net.Now().Sub(time.Unix(0, 0)).Seconds())
		})
	}
}

func TestFiftyNodesJoiningAtOnceAllSeeAllFifty(t *testing.T) {
	for _, tm := range []struct {
		name string
		t    Timings
	}{{"fast", cluster.FastTimings()}, {"default", cluster.DefaultTimings()}} {
		t.Run(tm.name, func(t *testing.T) {
			s := newSim(t, simOptions{seed: 50, timings: tm.t, mem: MemOptions{MinDelay: 200 * time.Microsecond, MaxDelay: 2 * time.Millisecond}})
			var addrs []string
			for i := range 50 {
				addrs = append(addrs, addr(i))
			}
			start := s.net.Now()
			for _, a := range addrs {
				s.start(a, addrs[0], addrs[1], addrs[2])
			}
			// Per node: when it first saw all fifty alive.
			seen := make(map[string]time.Duration)
			limit := 2 * time.Second
			for s.net.Now().Sub(start) < 10*limit && len(seen) < len(addrs) {
				s.run(time.Millisecond)
				for _, a := range addrs {
					if _, ok := seen[a]; !ok && s.allSee([]string{a}, addrs, StatusAlive) {
						seen[a] = s.net.Now().Sub(start)
					}
				}
			}
			if len(seen) < len(addrs) {
				t.Fatalf("expected all 50 nodes to see all 50; only %d did within %v", len(seen), 10*limit)
			}
			var worst time.Duration
			for _, d := range seen {
				worst = max(worst, d)
			}
			t.Logf("50 nodes joining at once (%s timings): every node sees all 50 alive within %v (max)", tm.name, worst)
			if worst > limit {
				t.Errorf("expected every one of 50 nodes to see all 50 within %v; the last took %v", limit, worst)
			}
		})
	}
}

// TestSimulationPartitionMinorityStepsDownBeforeBeingDeclaredDead splits
// the large cluster 40|60 and compares, in virtual time, the last
// minority step-down with the first dead verdict about a minority node.
func TestSimulationPartitionMinorityStepsDownBeforeBeingDeclaredDead(t *testing.T) {
	n := simSize(t)
	s := newSim(t, simOptions{seed: 2000, tick: fast.Heartbeat / 2, mem: MemOptions{MinDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	addrs := bootLarge(t, s, n)
	k := n * 2 / 5
	minority, majority := addrs[:k], addrs[k:]
	cut := s.net.Now()
	s.net.Partition(minority, majority)
	s.run(fast.SuspectAfter + fast.DeadAfter + 20*fast.Heartbeat)
	var lastDown time.Duration
	for _, a := range minority {
		var down time.Duration
		for _, e := range s.nodes[a].events {
			if e.Kind == EventStanding && !e.Owning && e.At.After(cut) {
				down = e.At.Sub(cut)
			}
		}
		if down == 0 {
			t.Fatalf("expected minority node %s to step down", a)
		}
		lastDown = max(lastDown, down)
	}
	firstDead := time.Duration(-1)
	minIDs := make(map[ring.NodeID]bool)
	for _, a := range minority {
		minIDs[s.nodes[a].core.ID()] = true
	}
	for _, a := range majority {
		if !s.nodes[a].core.Owning() {
			t.Errorf("expected majority node %s to keep owning", a)
		}
		for _, e := range s.nodes[a].events {
			if e.Kind == EventMemberUpdated && e.Member.Status == StatusDead && minIDs[e.Member.ID] && e.At.After(cut) {
				if d := e.At.Sub(cut); firstDead < 0 || d < firstDead {
					firstDead = d
				}
			}
		}
	}
	t.Logf("N=%d split %d|%d: last minority step-down %v after the cut; first dead verdict about a minority node %v after the cut (SuspectAfter+DeadAfter = %v)",
		n, k, n-k, lastDown, firstDead, fast.SuspectAfter+fast.DeadAfter)
	if firstDead >= 0 && lastDown >= firstDead {
		t.Errorf("expected every minority node to step down before the majority declared any of them dead; last step-down %v, first verdict %v", lastDown, firstDead)
	}
}

// TestDetectionTimeWithDefaultTimings kills one node of ten in 30 seeded
// trials with DefaultTimings and reports, in virtual time, how long until
// every survivor sees it dead (p50 and max).
func TestDetectionTimeWithDefaultTimings(t *testing.T) {
	def := cluster.DefaultTimings()
	var times []time.Duration
	for trial := range 30 {
		s := newSim(t, simOptions{seed: uint64(3000 + trial), timings: def, mem: MemOptions{MinDelay: 200 * time.Microsecond, MaxDelay: 2 * time.Millisecond}})
		addrs := s.cluster(10)
		victim := addrs[1+trial%9]
		s.kill(victim)
		d, ok := s.untilStep(10*def.SuspectAfter, 10*time.Millisecond, func() bool { return s.allSee(addrs, []string{victim}, StatusDead) })
		if !ok {
			t.Fatalf("trial %d: expected every survivor to see the victim dead; not after %v", trial, d)
		}
		times = append(times, d)
	}
	slices.Sort(times)
	t.Logf("kill -> every survivor sees dead, 10 nodes, default timings, 30 trials: p50 %v, max %v", times[len(times)/2], times[len(times)-1])
	if limit := def.SuspectAfter + def.DeadAfter + 2*def.Heartbeat; times[len(times)-1] > limit {
		t.Errorf("expected every trial within SuspectAfter+DeadAfter+2 heartbeats = %v; the worst took %v", limit, times[len(times)-1])
	}
}

// TestStarvedClusterDeclaresNoFalseDeath models CPU starvation on one
// machine: after any tick, every node's loop may stall (no ticks, nothing
// received) for a random time. With default timings and stalls up to
// 1.3 s (timers that late were measured under GOMAXPROCS=1 with CPU hogs),
// ten virtual minutes must bring no death verdict and no suspicion; with
// stalls up to 4 s, suspicions may come but must all be refuted, and still
// no one is declared dead.
func TestStarvedClusterDeclaresNoFalseDeath(t *testing.T) {
	def := cluster.DefaultTimings()
	for _, tc := range []struct {
		name         string
		maxStall     time.Duration
		allowSuspect bool
	}{
		{"stalls up to 1.3s", 1300 * time.Millisecond, false},
		{"stalls up to 4s", 4 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, simOptions{seed: 4000, timings: def, tick: def.Heartbeat / 4, mem: MemOptions{MinDelay: 200 * time.Microsecond, MaxDelay: 2 * time.Millisecond}})
			addrs := s.cluster(10)
			start := s.net.Now()
			rng := s.net.rng
			s.stall = func(*simNode) time.Duration {
				if rng.IntN(4) != 0 { // a quarter of the ticks stall
					return 0
				}
				return time.Duration(rng.Int64N(int64(tc.maxStall)))
			}
			s.run(10 * time.Minute)
			s.stall = nil
			s.run(20 * def.Heartbeat)
			suspicions := 0
			for _, a := range addrs {
				for _, e := range s.nodes[a].events {
					if e.Kind != EventMemberUpdated || e.At.Before(start) {
						continue
					}
					switch e.Member.Status {
					case StatusDead, StatusLeft:
						t.Fatalf("expected no false death under starvation; %s reported %v at %v", a, e.Member, e.At.Sub(start))
					case StatusSuspect:
						suspicions++
					}
				}
			}
			t.Logf("%s: 10 nodes, default timings, 10 virtual minutes (%d messages): %d suspicion events, 0 dead", tc.name, s.net.Stats().Delivered, suspicions)
			if suspicions > 0 && !tc.allowSuspect {
				t.Errorf("expected no suspicion with stalls below SuspectAfter; got %d", suspicions)
			}
			if !s.allSee(addrs, addrs, StatusAlive) {
				t.Fatal("expected every node alive everywhere once the starvation ends")
			}
		})
	}
}
