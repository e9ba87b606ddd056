package system

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/remote"
	"github.com/troupe-go/troupe/internal/testhook"
	"github.com/troupe-go/troupe/wire"
)

// member is what a clustered system adds to an embedded one.
type member struct {
	cfg    cluster.Config
	tr     *wire.Transport
	wt     *cluster.WireTransport
	node   *cluster.Node
	router *remote.Router
	sub    *cluster.Subscription
	leave  time.Duration
	done   chan struct{} // closed when the view loop ends
	once   sync.Once
	// leaveErr is what the handover abandoned; written by the handover,
	// read by Close after Leave returned.
	leaveErr *LeaveError
}

// Start starts a system. With cfg.Cluster set it listens, joins the
// cluster through the seeds (waiting until it has, or until ctx ends) and
// serves its share of the keys; without, it is New.
func Start(ctx context.Context, cfg Config) (*System, error) {
	if cfg.Cluster == nil {
		return New(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc := *cfg.Cluster
	cc.ActorTypes = make([]string, 0, len(cfg.Actors))
	for _, d := range cfg.Actors {
		cc.ActorTypes = append(cc.ActorTypes, d.Name())
	}
	slices.Sort(cc.ActorTypes)
	if cc.Logger == nil {
		cc.Logger = cfg.Logger
	}
	bind := cc.Bind
	if bind == "" {
		bind = cc.Advertise
	}
	if bind == "" {
		bind = "0.0.0.0:7400"
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", bind); err != nil {
			return nil, fmt.Errorf("troupe: start: %w", err)
		}
	}
	cc.Bind = ln.Addr().String()
	if cc.Advertise == "" {
		cc.Advertise = cc.Bind
	} else if h, p, _ := net.SplitHostPort(cc.Advertise); p == "0" {
		_, port, _ := net.SplitHostPort(cc.Bind)
		cc.Advertise = net.JoinHostPort(h, port)
	}
	if err := cc.Validate(); err != nil {
		ln.Close()
		return nil, fmt.Errorf("%w: Cluster: %w", ErrInvalidConfig, err)
	}
	inc := uint64(time.Now().UnixNano())
	wcfg := cc.WireConfig(inc)
	wcfg.Dialer = cfg.Dialer
	tr, err := wire.New(wcfg)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("troupe: start: %w", err)
	}
	m := &member{cfg: cc, tr: tr, leave: cfg.withDefaults().LeaveTimeout, done: make(chan struct{})}
	m.wt = cluster.NewWireTransport(tr, cluster.WireOptions{Logger: cc.Logger})
	m.router = remote.New(remote.Config{Endpoint: tr, Serve: true, Logger: cfg.withDefaults().Logger})
	s := newSystem(cfg, m.router)
	s.m = m
	m.router.SetHost(s.h)
	go tr.Serve(ln)
	node, err := cluster.Start(ctx, cc, m.wt, cluster.WithIncarnation(inc), cluster.WithHandover(s.handover))
	if err != nil {
		m.router.Close()
		s.h.Close(ctx)
		m.wt.Close()
		tr.Close()
		return nil, fmt.Errorf("troupe: start: %w", err)
	}
	m.node = node
	m.sub = node.Subscribe(1024)
	m.refresh()
	go m.follow()
	return s, nil
}

// refresh gives placement the node's current view.
func (m *member) refresh() {
	if m.router.Update(wire.NodeID(m.node.ID()), m.node.Owning(), m.node.Members()) {
		m.router.MoveOut()
	}
}

// follow refreshes placement on every membership event, and once a
// heartbeat in case events were missed.
func (m *member) follow() {
	defer close(m.done)
	t := time.NewTicker(m.cfg.Timings.Heartbeat)
	if m.cfg.Timings.Heartbeat <= 0 {
		t.Reset(cluster.DefaultTimings().Heartbeat)
	}
	defer t.Stop()
	for {
		select {
		case _, ok := <-m.sub.Events():
			if !ok {
				return
			}
			// Take what else queued before rebuilding once.
			for drained := false; !drained; {
				select {
				case _, ok := <-m.sub.Events():
					if !ok {
						return
					}
				default:
					drained = true
				}
			}
		case <-t.C:
		}
		m.refresh()
	}
}

// handover runs while this node is leaving: it stops serving keys, lets
// what is queued here drain until ctx ends, and reports what it abandoned.
func (s *System) handover(ctx context.Context) error {
	m := s.m
	m.refresh() // the node now announces leaving: placement skips it
	if dl, ok := ctx.Deadline(); ok {
		// Keep time to announce the leave once the drain gives up: a
		// member that vanishes without it is only removed after
		// RemoveAfter.
		margin := min(250*time.Millisecond, time.Until(dl)/4)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-margin))
		defer cancel()
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		st := s.Stats()
		if st.Queued == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			// Report, but let the leave complete: the rest of the cluster
			// must still hear that this member left.
			e := &LeaveError{Queued: s.Stats().Queued, Err: ctx.Err()}
			for _, k := range s.h.Kinds() {
				if l, ok := k.(host.QueueLister); ok {
					for _, key := range l.QueuedKeys(maxAbandoned - len(e.Abandoned)) {
						e.Abandoned = append(e.Abandoned, actor.ID{Type: k.Name(), Key: key})
					}
				}
			}
			m.leaveErr = e
			return nil
		case <-t.C:
		}
	}
}

// maxAbandoned bounds the keys a LeaveError lists.
const maxAbandoned = 1000

// LeaveError reports the work a leaving member abandoned when its leave
// timeout ended: keys with messages still queued, which the runtime then
// handles or fails as Close does.
type LeaveError struct {
	// Queued is the number of messages still queued.
	Queued int
	// Abandoned names the keys they were queued for (at most 1000).
	Abandoned []actor.ID
	Err       error
}

func (e *LeaveError) Error() string {
	return fmt.Sprintf("troupe: leave: %d messages for %d keys still queued when the handover ended: %v", e.Queued, len(e.Abandoned), e.Err)
}

func (e *LeaveError) Unwrap() error { return e.Err }

// Addr returns the address other members reach this system at ("" for an
// embedded system).
func (s *System) Addr() string {
	if s.m == nil {
		return ""
	}
	return s.m.cfg.Advertise
}

// Members returns the cluster's members as this node places keys on
// them, this node included (nil for an embedded system). It follows the
// membership within a heartbeat.
func (s *System) Members() []cluster.Member {
	if s.m == nil {
		return nil
	}
	return slices.Clone(s.m.router.Members())
}

// closeCluster leaves the cluster (handing keys over within the leave
// timeout) and stops the membership and the transport; the runtime
// closes in between.
func (s *System) closeMember(ctx context.Context, closeRuntime func(context.Context) error) error {
	m := s.m
	var errs []error
	m.once.Do(func() {
		lctx, cancel := context.WithTimeout(ctx, m.leave)
		if err := m.node.Leave(lctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
		if m.leaveErr != nil {
			errs = append(errs, m.leaveErr)
		}
		if err := closeRuntime(ctx); err != nil {
			errs = append(errs, err)
		}
		m.router.Close()
		m.node.Close()
		<-m.done
		m.wt.Close()
		// Let the last replies (of work the close aborted) reach their
		// askers, briefly: they are the only answers those asks get.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
		m.tr.Shutdown(sctx)
		cancel()
	})
	return errors.Join(errs...)
}

func init() { testhook.Crash = func(s any) { s.(*System).crash() } }

// crash stops the member without leaving, as a killed process would, for
// tests: peers find out by silence.
func (s *System) crash() {
	m := s.m
	m.once.Do(func() {
		m.tr.Close() // no goodbye reaches anyone once connections are cut
		m.router.Close()
		m.node.Close()
		<-m.done
		m.wt.Close()
		s.h.Close(context.Background())
	})
}
