package membership

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/ring"
)

// sim drives Cores over a MemNetwork: each node ticks on its own schedule
// (with a seeded phase) and steps every delivered message; after each call
// the harness sends what Ready lists and records the events.
type sim struct {
	tb    testing.TB
	net   *MemNetwork
	nodes map[string]*simNode
	order []string
	tick  time.Duration
	cfg   func(addr string) Config
	// stall, when set, is asked after every tick how long the node's loop
	// then stalls (0 for not at all): a model of CPU starvation, during
	// which the node neither ticks nor receives.
	stall func(n *simNode) time.Duration
	pinc  uint64
	// gate: nodes start held (HoldUntilReady) and marked ready at once,
	// as the runtime does; onReady, if set, is called when a node's
	// record first stops saying Joining.
	gate    bool
	onReady func(n *simNode)
}

type simNode struct {
	addr   string
	core   *Core
	ep     *MemEndpoint
	events []Event
	gen    int // bumped on pause, kill and restart to stop the old tick chain
	down   bool
	paused bool
	ready  bool
}

type simOptions struct {
	seed    uint64
	timings Timings
	mem     MemOptions
	tick    time.Duration // default Heartbeat/4
	config  func(*Config)
	gate    bool // see sim.gate
}

func newSim(tb testing.TB, o simOptions) *sim {
	tb.Helper()
	if o.timings == (Timings{}) {
		o.timings = cluster.FastTimings()
	}
	if o.tick == 0 {
		o.tick = o.timings.Heartbeat / 4
	}
	o.mem.Seed = o.seed
	s := &sim{tb: tb, net: NewMemNetwork(o.mem), nodes: make(map[string]*simNode), tick: o.tick, pinc: 100, gate: o.gate}
	s.cfg = func(addr string) Config {
		c := Config{Advertise: addr, Timings: o.timings, RandSeed: o.seed*7919 + uint64(len(s.order)) + 1}
		if o.config != nil {
			o.config(&c)
		}
		return c
	}
	return s
}

func addr(i int) string { return fmt.Sprintf("10.0.%d.%d:7400", i/250, i%250+1) }

// start launches a process at a (restarting it if it existed) that joins
// through seeds.
func (s *sim) start(a string, seeds ...string) *simNode {
	s.tb.Helper()
	cfg := s.cfg(a)
	cfg.Seeds = seeds
	s.pinc++
	core, err := NewCore(cfg, s.pinc, s.net.Now())
	if err != nil {
		s.tb.Fatalf("NewCore(%s): %v", a, err)
	}
	n := s.nodes[a]
	if n == nil {
		n = &simNode{addr: a}
		s.nodes[a] = n
		s.order = append(s.order, a)
	}
	if s.gate {
		core.HoldUntilReady()
		if err := core.MarkReady(); err != nil {
			s.tb.Fatalf("MarkReady(%s): %v", a, err)
		}
	}
	n.gen++
	n.core, n.down, n.paused, n.events, n.ready = core, false, false, nil, false
	n.ep = s.net.Endpoint(a, func(from string, m Message) {
		n.core.Step(m)
		s.drain(n)
	})
	s.drain(n)
	phase := time.Duration(s.net.rng.Int64N(int64(s.tick)))
	s.scheduleTick(n, n.gen, s.net.Now().Add(phase))
	return n
}

func (s *sim) scheduleTick(n *simNode, gen int, at time.Time) {
	s.net.Schedule(at, func() {
		if n.gen != gen || n.down || n.paused {
			return
		}
		n.core.Tick(s.net.Now())
		s.drain(n)
		if s.stall != nil {
			if d := s.stall(n); d > 0 {
				s.pause(n.addr)
				stalled := n.gen
				s.net.Schedule(s.net.Now().Add(d), func() {
					if n.gen == stalled && n.paused && !n.down {
						s.resume(n.addr)
					}
				})
				return
			}
		}
		s.scheduleTick(n, gen, s.net.Now().Add(s.tick))
	})
}

func (s *sim) drain(n *simNode) {
	if !n.ready && n.core.Routable() {
		n.ready = true
		if s.onReady != nil {
			s.onReady(n)
		}
	}
	r := n.core.Ready()
	for _, env := range r.Messages {
		if err := n.ep.Send(context.Background(), env.To, env.Msg); err != nil {
			s.tb.Fatalf("send from %s: %v", n.addr, err)
		}
	}
	for _, e := range r.Events {
		n.events = append(n.events, e)
		if e.Kind == EventMemberUpdated && (e.Member.Status == StatusDead || e.Member.Status == StatusLeft) {
			n.ep.PeerDead(e.Member.ID)
		}
	}
}

func (s *sim) kill(a string) {
	n := s.nodes[a]
	n.down = true
	n.gen++
	n.ep.Close()
}

func (s *sim) pause(a string) {
	n := s.nodes[a]
	n.paused = true
	n.gen++
	n.ep.Pause()
}

func (s *sim) resume(a string) {
	n := s.nodes[a]
	n.paused = false
	s.scheduleTick(n, n.gen, s.net.Now())
	n.ep.Resume()
}

func (s *sim) run(d time.Duration) { s.net.RunFor(d) }

// until runs in steps of one tick until cond holds or limit passes, and
// returns the virtual time it took.
func (s *sim) until(limit time.Duration, cond func() bool) (time.Duration, bool) {
	return s.untilStep(limit, s.tick, cond)
}

// untilStep is until with a chosen step, for finer measurements.
func (s *sim) untilStep(limit, step time.Duration, cond func() bool) (time.Duration, bool) {
	start := s.net.Now()
	for {
		if cond() {
			return s.net.Now().Sub(start), true
		}
		if s.net.Now().Sub(start) >= limit {
			return s.net.Now().Sub(start), false
		}
		s.net.RunFor(step)
	}
}

func (s *sim) live() []*simNode {
	var out []*simNode
	for _, a := range s.order {
		if n := s.nodes[a]; !n.down {
			out = append(out, n)
		}
	}
	return out
}

// status returns what observer believes about the current process at
// subject's address.
func (s *sim) status(observer, subject string) (Status, bool) {
	m, ok := s.nodes[observer].core.Member(s.nodes[subject].core.ID())
	return m.Status, ok
}

// allSee reports whether every live node in observers sees every process
// of subjects with status st.
func (s *sim) allSee(observers, subjects []string, st Status) bool {
	for _, o := range observers {
		if s.nodes[o].down {
			continue
		}
		for _, sub := range subjects {
			if o == sub {
				continue
			}
			if got, ok := s.status(o, sub); !ok || got != st {
				return false
			}
		}
	}
	return true
}

// cluster starts n nodes, all seeded with the first, and waits until each
// sees every other alive.
func (s *sim) cluster(n int) []string {
	s.tb.Helper()
	var addrs []string
	for i := range n {
		addrs = append(addrs, addr(i))
	}
	for _, a := range addrs {
		s.start(a, addrs[0])
	}
	if d, ok := s.until(30*s.cfg("x:1").WithDefaults().Timings.AntiEntropy, func() bool { return s.allSee(addrs, addrs, StatusAlive) }); !ok {
		s.tb.Fatalf("expected %d nodes to see each other alive; not after %v", n, d)
	}
	// Let the overlay settle: neighbour requests go out on the next
	// heartbeats.
	s.run(5 * s.cfg("x:1").WithDefaults().Timings.Heartbeat)
	return addrs
}

// everDeclared reports whether observer ever reported subject's process
// with status st.
func (s *sim) everDeclared(observer string, id ring.NodeID, st Status) bool {
	for _, e := range s.nodes[observer].events {
		if e.Kind == EventMemberUpdated && e.Member.ID == id && e.Member.Status == st {
			return true
		}
	}
	return false
}
