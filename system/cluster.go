package system

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/membership"
	"github.com/troupe-go/troupe/internal/remote"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// member is what a clustered system adds to an embedded one.
type member struct {
	cfg    cluster.Config // as validated at Start: Bind and Advertise fixed
	dialer wire.Dialer
	// limits and compression are the transport's, the same for every
	// incarnation.
	limits      wire.Limits
	compression wire.Compression
	log         *slog.Logger
	acc         *acceptor // the listener, handed from incarnation to incarnation
	router      *remote.Router
	st          *states    // nil when no definition keeps state
	refreshMu   sync.Mutex // one placement update at a time: st sees each ring change once
	cur         atomic.Pointer[incarnation]
	leave       time.Duration
	rec         *publisher    // the node record: set before the admin listener opens
	done        chan struct{} // closed when the view loop ends
	once        sync.Once
	// leaveErr is what the handover abandoned; written by the handover,
	// read by Close after Leave returned.
	leaveErr *LeaveError

	// Rejoining (see rejoin). stop is closed by Close: no
	// rejoin starts after it, and cancelRejoin ends the one under way;
	// rejoinMu is held by the view loop while it rejoins.
	stop         chan struct{}
	stopOnce     sync.Once
	rejoinCtx    context.Context
	cancelRejoin context.CancelFunc
	rejoinMu     sync.Mutex
	force        chan struct{} // a rejoin asked for by the package's tests (export_test.go)
	rejoins      atomic.Int64
	removed      atomic.Bool
	replaced     atomic.Bool // a newer process has the address: no rejoin

	// countsMu guards past, what the incarnations that rejoins closed
	// counted: the metrics add the current one's, so that the counters
	// never go back.
	countsMu sync.Mutex
	past     memberCounts
}

// memberCounts is what the membership and transport of a member counted.
type memberCounts struct {
	detector membership.Counts
	wire     transport.Stats // only the counters add up across incarnations
}

// counts returns what this member's incarnations counted so far, and
// the current one's transport snapshot (for its gauges; zero if none).
func (m *member) counts() (memberCounts, transport.Stats) {
	m.countsMu.Lock()
	defer m.countsMu.Unlock()
	c := m.past
	inc := m.cur.Load()
	if inc == nil || inc.closed.Load() {
		return c, transport.Stats{}
	}
	now := inc.tr.Stats()
	c.add(inc.node.Counts(), now)
	return c, now
}

// add adds an incarnation's counts to c.
func (c *memberCounts) add(d membership.Counts, w transport.Stats) {
	c.detector.Suspicions += d.Suspicions
	c.detector.Refutations += d.Refutations
	c.detector.Deaths += d.Deaths
	c.wire.Resumes += w.Resumes
	for i := range transport.NumStreams {
		c.wire.Sent[i].Frames += w.Sent[i].Frames
		c.wire.Sent[i].Bytes += w.Sent[i].Bytes
		c.wire.Received[i].Frames += w.Received[i].Frames
		c.wire.Received[i].Bytes += w.Received[i].Bytes
	}
}

// retire closes the books of old, an incarnation a rejoin replaces: its
// counts join past and the metrics no longer read it.
func (m *member) retire(old *incarnation) {
	m.countsMu.Lock()
	defer m.countsMu.Unlock()
	m.past.add(old.node.Counts(), old.tr.Stats())
	old.closed.Store(true)
}

// incarnation is one life of the member in the cluster: its transport
// identity (address and incarnation) and its membership.
type incarnation struct {
	tr   *transport.Transport
	wt   *membership.WireTransport
	node *membership.Node
	sub  *membership.Subscription
	// closed is set once a rejoin closed it (it was removed).
	closed atomic.Bool
}

// Start starts a system. With cfg.Cluster set it listens, joins the
// cluster through the seeds (waiting until it has, until ctx ends, or
// until Cluster.JoinTimeout passes: see cluster.JoinError) and serves its
// share of the keys once joined; without, it is New.
//
// Should the cluster remove the member while it runs (it was unreachable
// for longer than Timings.RemoveAfter, or judged dead falsely), the
// member rejoins by itself with a new incarnation, as a restarted process
// would: see System.Removed and Stats.Rejoins.
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
	wcfg.Limits = remote.WireLimits(cfg.withDefaults().MaxMessage)
	wcfg.Compression = cfg.Compression
	tr, err := transport.New(wcfg)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("troupe: start: %w", err)
	}
	log := cfg.withDefaults().Logger
	m := &member{cfg: cc, dialer: cfg.Dialer, limits: wcfg.Limits, compression: wcfg.Compression, log: log, leave: cfg.withDefaults().LeaveTimeout,
		done: make(chan struct{}), stop: make(chan struct{}), force: make(chan struct{}, 1)}
	m.rejoinCtx, m.cancelRejoin = context.WithCancel(context.Background())
	m.acc = newAcceptor(ln)
	wt := membership.NewWireTransport(tr, membership.WireOptions{Logger: cc.Logger})
	m.router = remote.New(remote.Config{Endpoint: tr, Serve: true, Logger: log, Silence: cc.WireSilence(), Handoff: cfg.withDefaults().LeaveTimeout})
	var st *states
	if durableTypes(cfg.Actors) {
		if st, err = openStates(cfg, log); err == nil {
			st.replicas, st.previous, st.gone = m.router.Replicas, m.router.PreviousReplicas, m.router.Gone
			st.placed = func(typ, key string) bool {
				_, here, err := m.router.Dest(typ, key, uint64(ring.KeyToken(typ, key)))
				return err == nil && here
			}
			st.alive, st.hosts = aliveHosts(m.router, cfg.Actors), anyHosts(m.router, cfg.Actors)
			st.stored, st.ring, st.status = storedTypes(cfg.Actors), m.router.Ring, m.router.Status
			st.entered, st.departed, st.viewLag = m.router.Entered, m.router.Departed, 2*cc.WithDefaults().Timings.AntiEntropy
			st.viewNow = func() replica.View {
				entered, departed := m.router.ViewNow()
				return replica.View{Entered: entered, Departed: departed}
			}
			m.st = st
			st.viewed = make(chan struct{})
			if st.maxValue > wcfg.Limits.MaxMessage-replicaRoom {
				st.maxValue = wcfg.Limits.MaxMessage - replicaRoom
			}
			if err = st.attach(ctx, tr); err != nil {
				st.store.Close()
			}
		}
		if err != nil {
			m.cancelRejoin()
			m.router.Close()
			wt.Close()
			tr.Close()
			m.acc.Close()
			return nil, fmt.Errorf("troupe: start: %w", err)
		}
	}
	cfg.Cluster = &cc // with Advertise fixed: the member's name in handlers and failures
	s := newSystem(cfg, m.router, st)
	s.m = m
	m.rec = newPublisher(cfg, cc, s.started)
	m.router.SetHost(s.h)
	// The admin listener answers while the member joins: not ready yet.
	err = s.startAdmin(cfg)
	var node *membership.Node
	if err == nil {
		go tr.Serve(m.acc.listener())
		node, err = membership.Start(ctx, cc, wt, membership.WithIncarnation(inc), membership.WithHandover(s.handover), membership.WithReadyGate())
	}
	if err != nil {
		s.stopAdmin(ctx)
		m.rec.halt(log)
		m.cancelRejoin()
		m.router.Close()
		s.h.Close(ctx)
		if s.st != nil {
			s.closeStates(ctx)
		}
		wt.Close()
		tr.Close()
		m.acc.Close()
		return nil, fmt.Errorf("troupe: start: %w", err)
	}
	m.cur.Store(&incarnation{tr: tr, wt: wt, node: node, sub: node.Subscribe(1024)})
	m.refresh()
	if st != nil {
		close(st.viewed) // a catch-up may now take an empty view for a cluster of one
	}
	// Only now, with the view in place, may others route keys here. Not
	// under ctx: a Start whose context ends just now still returns a
	// member, which must not stay joining (unplaced) for its life.
	if err := node.MarkReady(context.WithoutCancel(ctx)); err != nil {
		m.log.Warn("troupe: announcing this member ready failed; it takes no keys until it rejoins", "err", err)
	}
	// Placement takes this member in now, not when the event comes round:
	// the ring it had just before is what its hand-off receives from,
	// and members that become ready at the same moment must each see the
	// other's entry after their own or before it, never both before.
	m.refresh()
	go s.follow()
	m.rec.start(s)
	if err := waitRoutable(ctx, node, cc); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), cfg.withDefaults().LeaveTimeout)
		defer cancel()
		_ = s.Close(cctx)
		return nil, fmt.Errorf("troupe: start: %w", err)
	}
	m.refresh() // a member that waited takes its own place in placement now, as the founder did above
	return s, nil
}

// waitRoutable waits, up to JoinTimeout more, until the member
// takes keys: a member joined to others that all wait too (none of them
// is the first of the seed list) would otherwise be returned serving
// nothing.
func waitRoutable(ctx context.Context, node *membership.Node, cc cluster.Config) error {
	wctx, cancel := context.WithTimeout(ctx, cc.WithDefaults().JoinTimeout)
	defer cancel()
	err := node.WaitRoutable(wctx)
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err // done, the caller's context ended, or the node closed
	}
	first := ""
	if len(cc.Seeds) > 0 {
		first = slices.Min(cc.Seeds)
	}
	return fmt.Errorf("%w: joined, but no member takes keys yet: a new cluster starts at the smallest address of the seed list (%s), and the others wait for it", cluster.ErrJoinTimeout, first)
}

// refresh gives placement the node's current view.
func (m *member) refresh() {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	inc := m.cur.Load()
	var before map[string]*ring.Ring
	if m.st != nil {
		before = m.st.rings()
	}
	changed := m.router.Update(inc.node.ID(), inc.node.Owning(), inc.node.Members())
	if m.st != nil {
		m.st.viewChanged(before)
	}
	if changed {
		m.router.MoveOut()
		if m.st != nil {
			m.st.changed(before)
			m.st.pokeWaker() // keys with timers this member now owns
		}
	}
}

// follow refreshes placement on every membership event, and once a
// heartbeat in case events were missed; when the membership reports this
// member removed, it rejoins.
func (s *System) follow() {
	m := s.m
	defer close(m.done)
	t := time.NewTicker(m.cfg.Timings.Heartbeat)
	if m.cfg.Timings.Heartbeat <= 0 {
		t.Reset(cluster.DefaultTimings().Heartbeat)
	}
	defer t.Stop()
	for {
		inc := m.cur.Load()
		removed := false
		select {
		case ev, ok := <-inc.sub.Events():
			if !ok {
				return
			}
			removed = ev.Kind == membership.EventRemoved
			// Take what else queued before rebuilding once.
			for drained := false; !drained; {
				select {
				case ev, ok := <-inc.sub.Events():
					if !ok {
						return
					}
					removed = removed || ev.Kind == membership.EventRemoved
				default:
					drained = true
				}
			}
		case <-t.C:
		case <-m.force:
			removed = true
		}
		m.refresh()
		if removed || inc.node.Removed() {
			s.rejoin(inc)
		}
	}
}

// replicaRoom is what a replication envelope needs besides a state's
// value, key and slot name (the driver's own margin, envelopeRoom).
const replicaRoom = 64 << 10

// Rejoin backoff: the wait after a failed attempt doubles from
// rejoinBackoffMin up to rejoinBackoffMax; an attempt waits up to
// rejoinJoinTimeout to join through the seeds.
const (
	rejoinBackoffMin  = 250 * time.Millisecond
	rejoinBackoffMax  = 10 * time.Second
	rejoinJoinTimeout = 10 * time.Second
)

// rejoin replaces the removed incarnation old with a new one, attempting
// until it joins or Close stops it. It runs on the view loop, so one
// rejoin runs at a time. The actors' runtime stays as it is; the router
// moves to the new transport, and placement to the new view (keys no
// longer owned here move out as on any change).
func (s *System) rejoin(old *incarnation) {
	m := s.m
	m.rejoinMu.Lock()
	defer m.rejoinMu.Unlock()
	select {
	case <-m.stop:
		return
	default:
	}
	if m.cur.Load() != old {
		return
	}
	if m.replaced.Load() {
		return
	}
	m.removed.Store(true)
	self := old.node.ID()
	for _, mb := range old.node.Members() {
		if mb.ID.Addr == self.Addr && mb.ID.Incarnation > self.Incarnation && mb.Status != cluster.StatusLeft {
			// Another process took this address: rejoining would remove
			// it in turn, and it us, over and over.
			m.replaced.Store(true)
			m.log.Error("troupe: a newer process took this member's address; not rejoining", "member", self, "newer", mb.ID)
			return
		}
	}
	seeds := slices.Clone(m.cfg.Seeds)
	for _, mb := range old.node.Members() {
		if mb.Status == cluster.StatusAlive && mb.ID.Addr != self.Addr && !slices.Contains(seeds, mb.ID.Addr) {
			seeds = append(seeds, mb.ID.Addr)
		}
	}
	m.log.Warn("troupe: the cluster removed this member; rejoining with a new incarnation", "member", self, "seeds", seeds)
	// The removed identity is done: stop its membership and transport
	// (the listener stays, for the next one).
	m.retire(old)
	old.sub.Close()
	old.node.Close()
	old.wt.Close()
	old.tr.Close()
	if s.st != nil {
		// The node of the removed identity goes with it; the next one
		// opens on the same store.
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.st.detach(dctx)
		cancel()
		s.endStored()
	}
	last := self.Incarnation
	backoff := rejoinBackoffMin
	for attempt := 1; ; attempt++ {
		inc, err := s.join(seeds, last)
		if err == nil {
			m.cur.Store(inc)
			m.removed.Store(false)
			m.rejoins.Add(1)
			m.refresh()
			if err := inc.node.MarkReady(m.rejoinCtx); err != nil {
				m.log.Warn("troupe: announcing this member ready failed", "member", inc.node.ID(), "err", err)
			}
			m.refresh() // as in Start
			m.log.Warn("troupe: rejoined the cluster", "member", inc.node.ID(), "was", self, "attempts", attempt)
			return
		}
		if m.rejoinCtx.Err() != nil {
			return
		}
		m.log.Error("troupe: rejoining the cluster failed; retrying", "member", self.Addr, "attempt", attempt, "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-m.stop:
			t.Stop()
			return
		}
		backoff = min(2*backoff, rejoinBackoffMax)
	}
}

// endStored ends the activations of the durable types, as a move would
// (host.Mover): the node that acquired their keys went with the removed
// identity, so their writes could no longer meet a level. The next
// message of each key activates it afresh, acquiring it on the next
// node; keys with stored timers are woken again (timers.go).
func (s *System) endStored() {
	for _, k := range s.h.Kinds() {
		if _, durable := s.st.kinds[k.Name()]; !durable {
			continue
		}
		if m, ok := k.(host.Mover); ok {
			m.Moved(func(string) bool { return false })
		}
	}
}

// join starts a new incarnation (above last) at the member's address and
// joins the cluster through seeds.
func (s *System) join(seeds []string, last uint64) (*incarnation, error) {
	m := s.m
	id := max(uint64(time.Now().UnixNano()), last+1)
	cc := m.cfg
	cc.Seeds = seeds
	wcfg := cc.WireConfig(id)
	wcfg.Dialer = m.dialer
	wcfg.Limits, wcfg.Compression = m.limits, m.compression
	tr, err := transport.New(wcfg)
	if err != nil {
		return nil, err
	}
	wt := membership.NewWireTransport(tr, membership.WireOptions{Logger: cc.Logger})
	m.router.SetEndpoint(tr)
	ctx, cancel := context.WithTimeout(m.rejoinCtx, rejoinJoinTimeout)
	defer cancel()
	if s.st != nil {
		if err := s.st.attach(ctx, tr); err != nil {
			wt.Close()
			tr.Close()
			return nil, err
		}
	}
	go tr.Serve(m.acc.listener())
	node, err := membership.Start(ctx, cc, wt, membership.WithIncarnation(id), membership.WithHandover(s.handover), membership.WithReadyGate())
	if err != nil {
		if s.st != nil {
			s.st.detach(context.WithoutCancel(ctx))
		}
		wt.Close()
		tr.Close()
		return nil, err
	}
	return &incarnation{tr: tr, wt: wt, node: node, sub: node.Subscribe(1024)}, nil
}

// halt stops rejoining: no rejoin starts after it, and the one under way
// (if any) has ended when it returns.
func (m *member) halt() {
	m.stopOnce.Do(func() {
		close(m.stop)
		m.cancelRejoin()
	})
	// Wait for a rejoin under way: it holds rejoinMu throughout.
	m.rejoinMu.Lock()
	//lint:ignore SA2001 taking the lock is the wait
	m.rejoinMu.Unlock()
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
			// No ask of another node runs here from now on, and its
			// askers learn it before they learn the leave: what they
			// still wait on here never ran, and goes elsewhere (see
			// remote.Router.Retire).
			if err := m.router.Retire(ctx); err != nil {
				s.h.Logger.Warn("troupe: leave: asks of other nodes still running at the leave timeout; their askers get ErrOutcomeUnknown", "err", err)
			}
			if s.st != nil {
				hb := m.cfg.Timings.Heartbeat
				if hb <= 0 {
					hb = cluster.DefaultTimings().Heartbeat
				}
				s.st.handOver(ctx, 2*hb)
			}
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

// Members returns the cluster's current members as this node places
// keys on them, this node included (nil for an embedded system): one
// record per address, of the newest process there, sorted by NodeID.
// Members that left and the older processes of a restarted member are
// not listed; a member whose record says Joining gets no keys yet. It
// follows the membership within a heartbeat.
func (s *System) Members() []cluster.Member {
	if s.m == nil {
		return nil
	}
	return membership.Current(s.m.router.Members())
}

// closeCluster leaves the cluster (handing keys over within the leave
// timeout) and stops the membership and the transport; the runtime
// closes in between.
func (s *System) closeMember(ctx context.Context, closeRuntime func(context.Context) error) error {
	m := s.m
	var errs []error
	m.once.Do(func() {
		m.halt()
		inc := m.cur.Load()
		// A removed member has nothing to leave.
		if !inc.closed.Load() && !inc.node.Removed() {
			lctx, cancel := context.WithTimeout(ctx, m.leave)
			if err := inc.node.Leave(lctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
		if m.leaveErr != nil {
			errs = append(errs, m.leaveErr)
		}
		// Out of the cluster: its record goes too.
		m.rec.halt(m.log)
		if err := closeRuntime(ctx); err != nil {
			errs = append(errs, err)
		}
		if s.st != nil {
			s.closeStates(ctx)
		}
		m.router.Close()
		inc.node.Close()
		<-m.done
		inc.wt.Close()
		// Let the last replies (of work the close aborted) reach their
		// askers, briefly: they are the only answers those asks get.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
		inc.tr.Shutdown(sctx)
		cancel()
		m.acc.Close()
	})
	return errors.Join(errs...)
}

// Removed reports whether the cluster removed this member (its peers
// declared it dead, or a newer process took its address) and it has not
// rejoined yet: between the removal and the join of its new incarnation,
// or while that join fails (each failure is logged at Error; attempts go
// on with backoff until Close).
// It stays true, without rejoin attempts, when the member was removed
// because a newer process took its address (logged at Error): that
// process is the member now. It is false for an embedded system.
func (s *System) Removed() bool { return s.m != nil && s.m.removed.Load() }
