package replica

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/troupe-go/troupe/internal/lincheck"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
	"pgregory.net/rapid"
)

// TestRandomSchedulesStayLinearizable runs random schedules of client
// reads, writes, deletes and compare-and-sets on two keys (each with a
// state and two named continuity registers) over three to five nodes at Majority
// or All, while messages are lost, duplicated and reordered, nodes crash
// and restart from what they persisted, pause, are cut off from each
// other, or lose their store and catch up as a new incarnation, and
// nodes fence a key's range at its replicas (as a hand-off's copy does;
// half the time a member that joins a key's set does). Half the
// schedules write values of about 2 KiB that travel as deltas, and every
// record a replica persists is checked byte for byte against the value
// written. Any
// replica may acquire a key while another serves it; a take-over pauses
// an owner, lets another acquire and write, and resumes the stale owner
// with a request before the news reaches it. Clients give up after a
// deadline (the outcome is then unknown). After healing, every register
// is read once more. The whole history must be linearizable per register
// (porcupine), so no acknowledged write is lost and no read is stale; as
// the schedule runs, no replica's promise goes back.
//
// Rapid's default budget is 100 schedules, about 0.3 s with -race: the
// test runs scheduleRounds rounds of it, each from its own seed, for
// 1,000 schedules in about 5 s with -race on two cores (-short runs one
// round; -rapid.seed replays one schedule in every round).
func TestRandomSchedulesStayLinearizable(t *testing.T) {
	rounds := scheduleRounds
	if testing.Short() {
		rounds = 1
	}
	for range rounds {
		rapid.Check(t, randomSchedule)
	}
}

// scheduleRounds is how many times TestRandomSchedulesStayLinearizable
// runs rapid's budget of schedules.
const scheduleRounds = 10

func randomSchedule(rt *rapid.T) {
	n := rapid.IntRange(3, 5).Draw(rt, "nodes")
	level := rapid.SampledFrom([]replication.Level{replication.Majority, replication.All}).Draw(rt, "level")
	seed := rapid.Uint64().Draw(rt, "seed")
	large := rapid.Bool().Draw(rt, "large values")
	sweeps := rapid.Bool().Draw(rt, "sweeps")
	s, res, info := runSchedule(rt, n, level, seed, func(s *sim) {
		if large {
			s.withLargeValues()
		}
		s.sweeps = sweeps
		s.lags = true
	})
	if res != porcupine.Ok {
		if name, err := lincheck.Draw[register](info, "replica-history-*.html"); err == nil {
			rt.Logf("history drawn in %s", name)
		}
		model := lincheck.Model[register]()
		for _, op := range s.history {
			rt.Logf("[%d,%d] %s", op.Call, op.Return, model.DescribeOperation(op.Input, op.Output))
		}
		rt.Fatalf("history of %d operations is %s", len(s.history), res)
	}
}

// runSchedule runs the random schedule of seed over n nodes and checks
// its history; weaken, when set, removes a rule from the simulation.
func runSchedule(tb fataler, n int, level replication.Level, seed uint64, weaken func(*sim)) (*sim, porcupine.CheckResult, porcupine.LinearizationInfo) {
	keys := []Key{{Type: "reg", ID: "a"}, {Type: "reg", ID: "b"}}
	var regs []register
	for _, k := range keys {
		regs = append(regs,
			register{k, Slot{Kind: KindState}},
			register{k, Slot{Kind: KindContinuity, Name: "req-1"}},
			register{k, Slot{Kind: KindContinuity, Name: "req-2"}})
	}
	s := newSim(tb, n, level, keys)
	if os.Getenv("REPLICA_SIM_TRACE") != "" {
		s.trace = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	}
	if weaken != nil {
		weaken(s)
	}
	if s.sweeps {
		// Only keys whose records are all tombstones are collected: a
		// key of one register is, after each of its deletes.
		regs = slices.DeleteFunc(regs, func(r register) bool { return r.slot.Kind != KindState })
	}
	// rapid biases its draws towards small values; the schedule takes
	// its choices from a seeded generator instead, uniformly.
	rng := rand.New(rand.NewPCG(seed, 0))
	pick := func(n int) int { return rng.IntN(n) }
	if s.lags {
		// A fifth of the acquisitions come from a view that shows no
		// copier: refused by a floor, they step down, and nothing is
		// lost. Drawn apart, so that the schedule is the seed's.
		lag := rand.New(rand.NewPCG(seed, 1))
		s.lagging = func() bool { return lag.IntN(5) == 0 }
		// As many show the copiers but not the departures: refused by
		// a floor naming one, they acquire again naming it when their
		// set shows it (it holds the copier, not the departed member).
		s.lagsLeaves = func() bool { return lag.IntN(4) == 0 }
	}
	steps := 50 + pick(350)
	for range steps {
		node := s.nodes[pick(n)]
		s.expire(50)
		switch op := pick(104); {
		case op < 45:
			burst := 1 + pick(8)
			for j := 0; j < burst && len(s.net) > 0; j++ {
				m := pick(len(s.net))
				s.deliver(m, pick(20) == 0)
			}
		case op < 47:
			if len(s.net) > 0 {
				j := pick(len(s.net))
				s.net = append(s.net[:j], s.net[j+1:]...)
			}
		case op < 55:
			if !node.paused {
				s.tick(node)
			}
		case op < 58:
			k := keys[pick(len(keys))]
			// Mostly acquire keys nobody serves; sometimes take one over.
			steal := pick(4) == 0
			served := slices.ContainsFunc(s.nodes, func(o *simNode) bool { return o.core.Serving(k) })
			if !node.paused && !node.core.Serving(k) && contains(s.replicas[k], node) && (steal || !served) {
				s.acquire(node, k)
			}
		case op < 84:
			reg := regs[pick(len(regs))]
			var owners []*simNode
			for _, o := range s.nodes {
				if !o.paused && takes(o, reg.key) {
					owners = append(owners, o)
				}
			}
			if len(owners) == 0 {
				// A request for a key nobody serves activates it on
				// a replica, as the runtime would.
				r := s.node(s.replicas[reg.key][pick(len(s.replicas[reg.key]))])
				if !r.paused {
					s.acquire(r, reg.key)
				}
				continue
			}
			at := owners[pick(len(owners))]
			kind := lincheck.Op(pick(3))
			old := pick(s.nextVal + 1)
			s.clientOp(at, reg, kind, old)
		case op < 86:
			if s.large && !s.anyWiped() && (s.lossy || pick(3) == 0) {
				s.loseRecords(node, pick)
			} else {
				s.crash(node)
			}
			// An owner's crash is soon followed by an acquisition
			// elsewhere (or on the restarted node), as the runtime
			// would do after failure detection.
			if pick(2) == 0 {
				k := keys[pick(len(keys))]
				r := s.node(s.replicas[k][pick(len(s.replicas[k]))])
				if r != nil && !r.paused && !r.core.Serving(k) {
					s.acquire(r, k)
				}
			}
		case op < 87:
			node.paused = !node.paused
			s.tracef("paused %s = %v", node.id.Addr, node.paused)
		case op < 96:
			s.takeOver(keys[pick(len(keys))], pick, 200)
		case op < 98:
			other := s.nodes[pick(n)]
			cut := !s.cut[[2]string{node.id.Addr, other.id.Addr}]
			s.cut[[2]string{node.id.Addr, other.id.Addr}] = cut
			s.cut[[2]string{other.id.Addr, node.id.Addr}] = cut
		case op < 99:
			switch {
			case s.anyWiped():
			case s.large && pick(2) == 0:
				s.loseRecords(node, pick)
			default:
				s.wipe(node)
			}
		case op < 100:
			if node.wiped {
				s.catchUp(node, pick)
			}
		case op < 102:
			s.changeSet(keys[pick(len(keys))], pick)
		default:
			if !node.paused {
				s.fence(node, keys[pick(len(keys))], pick, nil)
			}
		}
	}
	s.settle()
	s.lagging, s.lagsLeaves = nil, nil // the views caught up
	s.finalReads(regs)
	s.abandon()
	res, info := porcupine.CheckOperationsVerbose(lincheck.Model[register](), s.history, 10*time.Second)
	return s, res, info
}

// takes reports whether n takes requests for k: it serves k, or acquires
// it again after a floor refused it.
func takes(n *simNode, k Key) bool {
	o := n.core.owned[k]
	return o != nil && o.served
}

func contains(set []ring.NodeID, n *simNode) bool {
	for _, id := range set {
		if id == n.id {
			return true
		}
	}
	return false
}

// TestRandomSchedulesWithLargeValuesSendDeltasAndNacks shows that the
// schedules with large values reach the delta accept path: writes go as
// deltas, and replicas that lost the base (restarted from a store that
// lost records) answer with nacks; every such history stays
// linearizable and every persisted record equals the value written.
func TestRandomSchedulesWithLargeValuesSendDeltasAndNacks(t *testing.T) {
	deltas, nacks := 0, 0
	for seed := range uint64(300) {
		s, res, _ := runSchedule(t, 3+int(seed%3), replication.Majority, seed, func(s *sim) {
			s.withLargeValues()
			s.lossy = true
		})
		if res != porcupine.Ok {
			t.Fatalf("seed %d: the history with large values is %s", seed, res)
		}
		deltas += s.deltas
		nacks += s.nacks
	}
	t.Logf("%d delta accepts and %d nacks delivered", deltas, nacks)
	if deltas == 0 || nacks == 0 {
		t.Fatalf("300 schedules with large values delivered %d delta accepts and %d nacks, want some of each", deltas, nacks)
	}
}

// TestRandomSchedulesCollectTombstones shows that the schedules collect
// tombstones (owners sweep every one, as soon as it is written, at each
// tick) and that their histories stay linearizable: a replica that
// missed a delete, crashed, lost records, was wiped, or joined the set
// later never brings the deleted value back.
func TestRandomSchedulesCollectTombstones(t *testing.T) {
	forgets := 0
	for seed := range uint64(400) {
		s, res, _ := runSchedule(t, 3+int(seed%3), replication.Majority, seed, func(s *sim) {
			s.sweeps = true
			if seed%4 == 0 {
				s.withLargeValues()
				s.lossy = true
			}
		})
		if res != porcupine.Ok {
			t.Fatalf("seed %d: the history with sweeps is %s", seed, res)
		}
		forgets += s.forgets
	}
	t.Logf("%d forgets delivered", forgets)
	if forgets == 0 {
		t.Fatal("400 schedules with sweeps delivered no forget")
	}
}

// TestRandomSchedulesWithLaggingViewsStepDownAtFloors shows that the
// schedules whose acquisitions sometimes come from views that show no
// copier (a fifth of them) reach the floors of fences: those step down,
// and the histories stay linearizable.
func TestRandomSchedulesWithLaggingViewsStepDownAtFloors(t *testing.T) {
	downs, refusals := 0, 0
	for seed := range uint64(300) {
		s, res, _ := runSchedule(t, 3+int(seed%3), replication.Majority, seed, func(s *sim) { s.lags = true })
		if res != porcupine.Ok {
			t.Fatalf("seed %d: the history with lagging views is %s", seed, res)
		}
		downs += s.floorDowns
		refusals += s.departureRefusals
	}
	t.Logf("%d prepares above a floor refused for not naming its departures", refusals)
	if refusals == 0 {
		t.Fatal("300 schedules with views lagging departures had no prepare refused for not naming one")
	}
	t.Logf("%d acquisitions stepped down at a floor", downs)
	if downs == 0 {
		t.Fatal("300 schedules with lagging views had no acquisition step down at a floor")
	}
}

// TestRandomSchedulesFindACollectionWithoutHorizons shows that the
// horizon is needed: with collections whose horizons are lost on the way,
// some history brings a deleted value back.
func TestRandomSchedulesFindACollectionWithoutHorizons(t *testing.T) {
	findIllegal(t, "collections without horizons", func(s *sim) { s.sweeps, s.noHorizon = true, true })
}

// TestRandomSchedulesFindTheUnfencedSetChange shows that the schedules
// reach the gap that joint acquisitions close: with acquisitions that
// ignore the previous set, some seed's history is not linearizable.
func TestRandomSchedulesFindTheUnfencedSetChange(t *testing.T) {
	findIllegal(t, "plain acquisitions after a change of set", func(s *sim) { s.plain = true })
}

// TestRandomSchedulesFindAWipedReplicaThatCountsAtOnce shows that the
// schedules reach the gap that catching up closes: with a wiped replica
// that counts as soon as it restarts, some seed's history is not
// linearizable.
func TestRandomSchedulesFindAWipedReplicaThatCountsAtOnce(t *testing.T) {
	findIllegal(t, "a wiped replica counting at once", func(s *sim) { s.wipedCounts = true })
}

// TestRandomSchedulesFindARestartBeforeTheCatchUpThatCounts shows that
// the receiving ranges must be persisted: a wiped replica that restarts
// before it caught up, with what it stored while receiving, and counts
// because its store is not empty, lets some history lose a write.
func TestRandomSchedulesFindARestartBeforeTheCatchUpThatCounts(t *testing.T) {
	findIllegal(t, "receiving forgotten at a restart", func(s *sim) { s.volatileReceiving = true })
}

// TestRandomSchedulesFindACatchUpFromTooFewSources shows that a catch-up
// needs a quorum of sources: from one source, some history is not
// linearizable.
func TestRandomSchedulesFindACatchUpFromTooFewSources(t *testing.T) {
	findIllegal(t, "a catch-up from one source", func(s *sim) { s.oneSource = true })
}

// findIllegal runs seeded schedules over four and five nodes at Majority
// until one history is not linearizable, and fails if none is.
func findIllegal(t *testing.T, what string, weaken func(*sim)) {
	t.Helper()
	for seed := range uint64(2000) {
		_, res, _ := runSchedule(t, 4+int(seed%2), replication.Majority, seed, weaken)
		if res == porcupine.Illegal {
			t.Logf("seed %d: not linearizable with %s", seed, what)
			return
		}
	}
	t.Fatalf("no schedule of 2,000 lost a write with %s: the schedules no longer reach the gap", what)
}
