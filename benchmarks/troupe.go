package main

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// troupeMailbox bounds Troupe's mailboxes in the throughput workloads.
// Proto.Actor's default mailbox is unbounded, so Troupe gets a bound no
// workload reaches, with Wait overflow: a sender would wait, never fail.
const troupeMailbox = math.MaxInt32

// Messages of the Troupe workloads: one sealed interface per actor type.
type (
	countMsg interface{ countMsg() }
	add      struct{ N int }
	get      struct{ actor.Reply[countMsg, int] }

	ballMsg interface{ ballMsg() }
	ball    struct {
		Left int
		Peer actor.Ref[ballMsg]
	}

	touchMsg interface{ touchMsg() }
	touch    struct{}
)

func (add) countMsg()   {}
func (get) countMsg()   {}
func (ball) ballMsg()   {}
func (touch) touchMsg() {}

type troupePeer struct {
	mailbox int        // bound of the throughput workloads' mailboxes
	rem     *remoteEnv // nodes of the remote workloads
	// metrics gives the systems of tell and ask a Prometheus registry
	// (system.Config.Metrics): the *-metrics workloads.
	metrics bool
}

func (troupePeer) Name() string { return "troupe" }

// counterDef counts add messages and calls reached once the count hits
// target; get answers the count.
func (p troupePeer) counterDef(target int, reached func()) *actor.Def[int, countMsg] {
	return actor.Define("counter", func(c *actor.Context[int, countMsg], m countMsg) error {
		switch m := m.(type) {
		case add:
			n := c.State() + m.N
			c.SetState(n)
			if n == target {
				reached()
			}
		case get:
			return actor.Respond(c, m, c.State())
		}
		return nil
	}, actor.WithMailbox(p.mailbox, actor.Wait))
}

func newTroupe(defs ...actor.Definition) (*system.System, error) {
	return system.New(system.Config{Actors: defs})
}

// newSystem is newTroupe with metrics on a registry of its own when p
// says so.
func (p troupePeer) newSystem(defs ...actor.Definition) (*system.System, error) {
	cfg := system.Config{Actors: defs}
	if p.metrics {
		cfg.Metrics = prometheus.NewRegistry()
	}
	return system.New(cfg)
}

// metricsPair measures run on Troupe with metrics off and on, in the
// order off, on, on, off, so that drift in the machine's load falls on
// both: primary (and the latencies, CPU) are the means with metrics,
// base and baseCPU without.
func metricsPair(p peer, run func(tp troupePeer, clk *clock) (measurement, error)) (measurement, error) {
	tp := p.(troupePeer)
	var on, off measurement
	for _, metrics := range []bool{false, true, true, false} {
		tp.metrics = metrics
		m, err := run(tp, &clock{})
		if err != nil {
			return measurement{}, err
		}
		into := &off
		if metrics {
			into = &on
		}
		into.primary += m.primary / 2
		into.cpuPerOp += m.cpuPerOp / 2
		into.p50 += m.p50 / 2
		into.p99 += m.p99 / 2
	}
	on.base, on.baseCPU = off.primary, off.cpuPerOp
	return on, nil
}

func closeTroupe(sys *system.System) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return sys.Close(ctx)
}

func (p troupePeer) Tell(clk *clock, n int) (err error) {
	done := make(chan struct{})
	def := p.counterDef(n, func() { close(done) })
	sys, err := p.newSystem(def)
	if err != nil {
		return err
	}
	defer func() { err = firstErr(err, closeTroupe(sys)) }()
	ref := def.Ref(sys, "c")
	ctx := context.Background()
	clk.start()
	for range n {
		if err := ref.Tell(ctx, add{N: 1}); err != nil {
			return err
		}
	}
	<-done
	clk.stop()
	return nil
}

func (p troupePeer) TellMany(clk *clock, senders, keys, per int) (err error) {
	var wg sync.WaitGroup
	wg.Add(keys)
	def := p.counterDef(senders*per, wg.Done)
	sys, err := newTroupe(def)
	if err != nil {
		return err
	}
	defer func() { err = firstErr(err, closeTroupe(sys)) }()
	refs := make([]actor.Ref[countMsg], keys)
	for i := range refs {
		refs[i] = def.Ref(sys, activationKey(i))
	}
	ctx := context.Background()
	errs := make(chan error, senders)
	clk.start()
	for s := range senders {
		go func() {
			for range per {
				for k := range keys {
					if err := refs[(k+s)%keys].Tell(ctx, add{N: 1}); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range senders {
		if err := <-errs; err != nil {
			return err
		}
	}
	wg.Wait()
	clk.stop()
	return nil
}

func (p troupePeer) Ask(clk *clock, n int) (lat []time.Duration, err error) {
	def := p.counterDef(-1, nil)
	sys, err := p.newSystem(def)
	if err != nil {
		return nil, err
	}
	defer func() { err = firstErr(err, closeTroupe(sys)) }()
	ref := def.Ref(sys, "c")
	ctx := context.Background()
	if _, err := actor.Ask(ctx, ref, get{}); err != nil { // activate outside the timed region
		return nil, err
	}
	lat = make([]time.Duration, n)
	clk.start()
	for i := range lat {
		t0 := time.Now()
		if _, err := actor.Ask(ctx, ref, get{}); err != nil {
			return nil, err
		}
		lat[i] = time.Since(t0)
	}
	clk.stop()
	return lat, nil
}

func (p troupePeer) PingPong(clk *clock, pairs, m int) (err error) {
	var wg sync.WaitGroup
	def := actor.Define("pinger", func(c *actor.Context[struct{}, ballMsg], msg ballMsg) error {
		b := msg.(ball)
		if b.Left == 0 {
			wg.Done()
			return nil
		}
		return b.Peer.Tell(c, ball{Left: b.Left - 1, Peer: c.Self()})
	}, actor.WithMailbox(p.mailbox, actor.Wait))
	sys, err := newTroupe(def)
	if err != nil {
		return err
	}
	defer func() { err = firstErr(err, closeTroupe(sys)) }()
	ctx := context.Background()
	wg.Add(pairs)
	clk.start()
	for i := range pairs {
		a, b := def.Ref(sys, "a"+activationKey(i)), def.Ref(sys, "b"+activationKey(i))
		if err := a.Tell(ctx, ball{Left: m, Peer: b}); err != nil {
			return err
		}
	}
	wg.Wait()
	clk.stop()
	return nil
}

func (p troupePeer) Activate(clk *clock, keys []string, quiet time.Duration) (heap int64, err error) {
	var handled atomic.Int64
	done := make(chan struct{})
	want := int64(len(keys))
	def := actor.Define("activated", func(c *actor.Context[struct{}, touchMsg], _ touchMsg) error {
		if handled.Add(1) == want {
			close(done)
		}
		return nil
	})
	sys, err := newTroupe(def)
	if err != nil {
		return 0, err
	}
	defer func() { err = firstErr(err, closeTroupe(sys)) }()
	ctx := context.Background()
	base := markHeap()
	clk.start()
	for _, k := range keys {
		if err := def.Ref(sys, k).Tell(ctx, touch{}); err != nil {
			return 0, err
		}
	}
	<-done
	clk.stop()
	heap = settle(base, quiet)
	if got := sys.Stats().Active; got != len(keys) {
		return 0, errorf("troupe: %d keys active after activating %d", got, len(keys))
	}
	return heap, nil
}
