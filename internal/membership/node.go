package membership

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// Node runs a Core for real: one goroutine, the placement loop, owns the
// Core. It ticks it on a timer, feeds it the transport's last-bytes times
// before each tick, steps the messages the transport delivers, sends what
// Ready lists, forwards death verdicts to the transport (PeerDead), and
// publishes events and a snapshot of the table.
//
// Because the loop that sends the membership pings is the one that owns
// placement, a node whose loop is wedged stops pinging and is suspected,
// even while its transport still moves bytes. Keep the loop free: event
// subscribers never block it (see Subscribe), and the handover hook of
// Leave runs on the caller's goroutine.
//
// The methods of a Node are safe for concurrent use. A Node does not own
// its Transport: close the transport after the Node.
type Node struct {
	cfg   Config
	tr    Transport
	log   *slog.Logger
	opts  nodeOptions
	id    ring.NodeID
	core  *Core // owned by the loop
	peers map[ring.NodeID]struct{}
	// Loop-owned bookkeeping of the published view.
	published  time.Time
	joinedSeen bool

	inbox   chan Message
	unreach chan unreachableReport
	calls   chan nodeCall
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the loop has ended
	// ctx ends at Close; sends made by the loop use it.
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce  sync.Once
	joined     chan struct{} // closed when the core first reports joined
	joinedOnce sync.Once
	// routable is closed when the core's record first stops saying
	// Joining (see WaitRoutable).
	routable     chan struct{}
	routableOnce sync.Once

	// counts is the core's Counts as of the loop's last change.
	counts atomic.Pointer[Counts]

	mu   sync.Mutex // guards view and subs
	view nodeView
	subs map[*Subscription]struct{}
}

// nodeView is what the loop publishes after each change, for readers on
// other goroutines.
//
// TODO(core): what the runtime works around today:
//   - becoming joined raises no event; the loop compares Core.Joined after
//     every Ready.
//   - records that change without a status change (incarnation, accusers)
//     raise no event and Core.Members clones the whole table, so the view is
//     refreshed on events and at most once per heartbeat otherwise; a list
//     of the records changed since the last Ready would make it O(changes).
//   - a live process marked left (removed after a false death verdict, or
//     replaced) can only be reported: rejoining needs a new incarnation,
//     hence a new wire transport; an option taking a transport factory
//     could restart the membership automatically.
type nodeView struct {
	members   []Member
	memberSet []ring.NodeID
	owning    bool
	healthy   bool
	joined    bool
	removed   bool
}

type unreachableReport struct {
	id ring.NodeID
	at time.Time
}

type nodeCall struct {
	fn   func(*Core) error
	errc chan error
}

// Inbound is implemented by transports that deliver the membership
// messages they receive themselves, as WireTransport does. Start calls
// SetReceiver once, before the loop starts, with the Node's Deliver. A
// transport that does not implement it leaves the caller to feed received
// messages to Node.Deliver.
type Inbound interface {
	SetReceiver(deliver func(ctx context.Context, m Message) error)
}

// UnreachableReporter is implemented by transports that learn that a
// peer is unreachable before its silence shows it, as WireTransport does:
// a connection to the peer broke and a dial to it failed. newNode calls
// SetUnreachable once, before the loop starts, with the Node's
// Unreachable.
type UnreachableReporter interface {
	SetUnreachable(f func(id ring.NodeID, at time.Time))
}

// Flusher is implemented by transports that can wait until what was sent
// has reached its peers. Leave calls Flush after the final left
// announcement, so that closing the transport next does not cut it off.
type Flusher interface {
	Flush(ctx context.Context) error
}

// SelfReporter is implemented by transports that know the identity they
// speak for, as WireTransport does: Start takes the process incarnation
// from it and checks its address against Config.Advertise.
type SelfReporter interface {
	Self() ring.NodeID
}

// NodeOption configures a Node beyond its Config.
type NodeOption func(*nodeOptions)

type nodeOptions struct {
	incarnation uint64
	handover    func(ctx context.Context) error
	tick        time.Duration
	inbox       int
	readyGate   bool
}

// WithReadyGate makes the node's record say Joining (no key is placed on
// it) until MarkReady is called, the node has joined and it sees a
// majority: the runtime calls MarkReady once the view is installed, so
// that no request reaches it before it can place keys. Default: the record
// never says Joining.
func WithReadyGate() NodeOption {
	return func(o *nodeOptions) { o.readyGate = true }
}

// DialReporter is implemented by transports that remember why the last
// dial to an address failed, as WireTransport does over a real transport:
// a failed join then names each seed's error.
type DialReporter interface {
	DialError(addr string) error
}

// WithIncarnation sets the process incarnation, the half of the NodeID
// that changes on every restart. Default: the transport's, if it is a
// SelfReporter, else the wall clock in nanoseconds at Start.
func WithIncarnation(inc uint64) NodeOption {
	return func(o *nodeOptions) { o.incarnation = inc }
}

// WithHandover sets the hook Leave runs between announcing leaving and
// announcing left: hand over what this node owns. It runs on the goroutine
// that called Leave, with Leave's context, while the loop keeps the node
// alive (as leaving) in everyone's eyes. Default: nothing to hand over.
func WithHandover(f func(ctx context.Context) error) NodeOption {
	return func(o *nodeOptions) { o.handover = f }
}

// WithTickInterval sets how often the loop ticks the Core. Ticking more
// often than the heartbeat sharpens detection without sending more.
// Default Heartbeat/4; at most Heartbeat.
func WithTickInterval(d time.Duration) NodeOption {
	return func(o *nodeOptions) { o.tick = d }
}

// WithInboxSize bounds the received messages waiting for the loop; Deliver
// waits while it is full. Default 1024.
func WithInboxSize(n int) NodeOption {
	return func(o *nodeOptions) { o.inbox = n }
}

// Start validates cfg, starts the placement loop over tr and waits until
// the node has joined: learned the table from a seed, or at once when it
// has no seeds other than itself. If ctx ends first, Start closes the node
// and returns ctx's error. The node's lifetime does not depend on ctx.
//
// The Logger of cfg receives the runtime's messages with the Core's.
//
// The join is bounded by Config.JoinTimeout too, and fails at once when
// every seed refused the handshake (if tr is a DialReporter): the error is
// then a *cluster.JoinError naming each seed's last error.
func Start(ctx context.Context, cfg Config, tr Transport, opts ...NodeOption) (*Node, error) {
	n, err := newNode(cfg, tr, opts...)
	if err != nil {
		return nil, err
	}
	n.startLoop()
	select {
	case <-n.joined:
		return n, nil
	default:
	}
	dr, _ := tr.(DialReporter)
	seeds := otherSeeds(n.cfg)
	timeout := time.NewTimer(n.cfg.JoinTimeout)
	defer timeout.Stop()
	poll := time.NewTicker(n.opts.tick)
	defer poll.Stop()
	for {
		select {
		case <-n.joined:
			return n, nil
		case <-ctx.Done():
			n.Close()
			return nil, JoinFailure(ctx.Err(), seeds, dr)
		case <-timeout.C:
			n.Close()
			return nil, JoinFailure(ErrJoinTimeout, seeds, dr)
		case <-poll.C:
			if AllRefused(seeds, dr) {
				n.Close()
				return nil, JoinFailure(ErrJoinRefused, seeds, dr)
			}
		}
	}
}

// otherSeeds are the seeds a node joins through: not itself.
func otherSeeds(cfg Config) []string {
	var out []string
	for _, s := range cfg.Seeds {
		if s != cfg.Advertise && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// MarkReady tells the node that the runtime has installed its view (see
// WithReadyGate).
func (n *Node) MarkReady(ctx context.Context) error { return n.call(ctx, (*Core).MarkReady) }

// WaitRoutable waits until the node's record stops saying Joining: after
// MarkReady, once the node has joined, sees a majority and knows a member
// that takes keys (or founds the cluster: see Core.MarkReady). It returns
// ErrNodeClosed if the node closes first, or ctx's error.
func (n *Node) WaitRoutable(ctx context.Context) error {
	select {
	case <-n.routable: // first: a routable node is routable whatever ctx says
		return nil
	default:
	}
	select {
	case <-n.routable:
		return nil
	case <-n.done:
		return ErrNodeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newNode(cfg Config, tr Transport, opts ...NodeOption) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	var o nodeOptions
	for _, f := range opts {
		f(&o)
	}
	if sr, ok := tr.(SelfReporter); ok {
		self := sr.Self()
		if self.Addr != cfg.Advertise {
			return nil, fmt.Errorf("%w: transport is %v, Advertise is %q", ErrIdentityMismatch, self, cfg.Advertise)
		}
		if o.incarnation == 0 {
			o.incarnation = self.Incarnation
		} else if o.incarnation != self.Incarnation {
			return nil, fmt.Errorf("%w: transport is %v, WithIncarnation is %d", ErrIdentityMismatch, self, o.incarnation)
		}
	}
	if o.incarnation == 0 {
		o.incarnation = uint64(time.Now().UnixNano())
	}
	if o.tick <= 0 || o.tick > cfg.Timings.Heartbeat {
		o.tick = cfg.Timings.Heartbeat / 4
	}
	if o.inbox <= 0 {
		o.inbox = 1024
	}
	core, err := NewCore(cfg, o.incarnation, time.Now())
	if err != nil {
		return nil, err
	}
	if o.readyGate {
		core.HoldUntilReady()
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg:      cfg,
		tr:       tr,
		log:      cfg.Logger.With("node", core.ID().String()),
		opts:     o,
		id:       core.ID(),
		core:     core,
		peers:    make(map[ring.NodeID]struct{}),
		inbox:    make(chan Message, o.inbox),
		unreach:  make(chan unreachableReport, unreachBacklog),
		calls:    make(chan nodeCall),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		ctx:      ctx,
		cancel:   cancel,
		joined:   make(chan struct{}),
		routable: make(chan struct{}),
		subs:     make(map[*Subscription]struct{}),
	}
	if in, ok := tr.(Inbound); ok {
		in.SetReceiver(n.Deliver)
	}
	if ur, ok := tr.(UnreachableReporter); ok {
		ur.SetUnreachable(n.Unreachable)
	}
	return n, nil
}

func (n *Node) startLoop() {
	// The first Ready carries the initial member set and, for a node
	// without seeds, its standing.
	n.apply(n.core.Ready())
	go n.loop()
}

// ID returns this process's identity.
func (n *Node) ID() ring.NodeID { return n.id }

// Deliver hands the node a membership message received from the network.
// It waits while the inbox is full, so a slow loop slows the sender's
// membership stream rather than losing its messages, and returns
// ErrNodeClosed once the node is closed, or ctx's error.
func (n *Node) Deliver(ctx context.Context, m Message) error {
	// A closed node refuses even when its inbox has room.
	select {
	case <-n.stop:
		return ErrNodeClosed
	default:
	}
	select {
	case n.inbox <- m:
		return nil
	case <-n.stop:
		return ErrNodeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unreachBacklog bounds the unreachable reports waiting for the loop.
const unreachBacklog = 64

// Unreachable tells the node that a dial to the process id failed at
// time at, after its connection broke (see Core.Unreachable). It never
// blocks: a report that finds the backlog full is dropped, as silence
// will tell the same.
func (n *Node) Unreachable(id ring.NodeID, at time.Time) {
	select {
	case n.unreach <- unreachableReport{id: id, at: at}:
	default:
		n.log.Debug("membership: unreachable report dropped", "peer", id)
	}
}

// Counts returns what this node's failure detector did so far (see
// Core.Counts), as of the loop's last change.
func (n *Node) Counts() Counts {
	if c := n.counts.Load(); c != nil {
		return *c
	}
	return Counts{}
}

// Members returns every record this node holds, tombstones included,
// sorted by NodeID, as of the loop's last change.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Member, len(n.view.members))
	for i, m := range n.view.members {
		out[i] = m.Clone()
	}
	return out
}

// Member returns the record this node holds about id.
func (n *Node) Member(id ring.NodeID) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	i, ok := slices.BinarySearchFunc(n.view.members, id, func(m Member, id ring.NodeID) int { return m.ID.Compare(id) })
	if !ok {
		return Member{}, false
	}
	return n.view.members[i].Clone(), true
}

// MemberSet returns the target member set (every member not left), sorted
// by NodeID: what placement builds the ring from.
func (n *Node) MemberSet() []ring.NodeID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.view.memberSet)
}

// Owning reports whether this node may own non-pinned actors: it sees a
// majority of the member set alive, or lost it less than DeadAfter/2 ago.
func (n *Node) Owning() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view.owning
}

// Healthy reports whether this node trusts its own observations (see
// Core.Healthy).
func (n *Node) Healthy() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view.healthy
}

// Removed reports whether this process was marked left: after Leave, or
// because the cluster removed it or a newer process took its address. A
// removed process must restart with a new incarnation to rejoin.
func (n *Node) Removed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view.removed
}

// Subscription receives a node's events in the order the Core made them.
type Subscription struct {
	n      *Node
	ch     chan Event
	missed atomic.Uint64
	closed bool // guarded by n.mu
}

// Subscribe returns a subscription whose channel holds up to size events
// (at least 1). The loop never waits for a subscriber: when the channel is
// full, the event is dropped and counted in Missed, and the subscriber
// should read the current state from Members. The channel is closed by
// Close of the subscription or of the node.
func (n *Node) Subscribe(size int) *Subscription {
	s := &Subscription{n: n, ch: make(chan Event, max(1, size))}
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.done:
		s.closed = true
		close(s.ch)
	default:
		n.subs[s] = struct{}{}
	}
	return s
}

// Events returns the channel the events arrive on.
func (s *Subscription) Events() <-chan Event { return s.ch }

// Missed returns how many events were dropped because the channel was
// full.
func (s *Subscription) Missed() uint64 { return s.missed.Load() }

// Close ends the subscription and closes its channel.
func (s *Subscription) Close() {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if !s.closed {
		s.closed = true
		delete(s.n.subs, s)
		close(s.ch)
	}
}

// Leave departs in order: the record becomes leaving, the handover hook
// runs (see WithHandover), then the record becomes left and is pushed to
// the neighbours; if the transport is a Flusher, Leave waits for that push
// to reach them. If the hook fails, the node stays leaving and Leave
// returns the hook's error; calling Leave again retries. Afterwards the
// node is inert; Close it.
func (n *Node) Leave(ctx context.Context) error {
	if err := n.call(ctx, (*Core).StartLeave); err != nil {
		return err
	}
	if h := n.opts.handover; h != nil {
		if err := h(ctx); err != nil {
			return fmt.Errorf("troupe: leave: handover: %w", err)
		}
	}
	if err := n.call(ctx, (*Core).CompleteLeave); err != nil {
		return err
	}
	if f, ok := n.tr.(Flusher); ok {
		// Live peers take the left record within a round trip; a peer
		// that is gone never does, and must not hold the leave for the
		// message TTL. Peers that got it spread it by gossip.
		fctx, cancel := context.WithTimeout(ctx, n.cfg.Timings.Heartbeat)
		err := f.Flush(fctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("troupe: leave: flush: %w", err)
			}
			n.log.Debug("leave: some peers did not take the left record within a heartbeat", "err", err)
		}
	}
	return nil
}

// call runs fn on the loop and returns its error.
func (n *Node) call(ctx context.Context, fn func(*Core) error) error {
	c := nodeCall{fn: fn, errc: make(chan error, 1)}
	select {
	case n.calls <- c:
	case <-n.done:
		return ErrNodeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the loop and closes every subscription. It does not say
// goodbye: peers will find this node silent and declare it dead; use Leave
// first for an orderly departure. Close does not close the transport.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		<-n.done
		n.cancel()
		n.mu.Lock()
		for s := range n.subs {
			s.closed = true
			close(s.ch)
		}
		clear(n.subs)
		n.mu.Unlock()
	})
	return nil
}

// loop is the placement loop: the only goroutine that touches the Core.
func (n *Node) loop() {
	defer close(n.done)
	ticker := time.NewTicker(n.opts.tick)
	defer ticker.Stop()
	const batch = 64
	for {
		select {
		case <-n.stop:
			return
		case <-ticker.C:
			n.feedHeard()
			n.core.Tick(time.Now())
		case m := <-n.inbox:
			n.core.Step(m)
			for range batch - 1 {
				select {
				case m = <-n.inbox:
					n.core.Step(m)
					continue
				default:
				}
				break
			}
		case u := <-n.unreach:
			n.core.Unreachable(u.id, u.at)
		case c := <-n.calls:
			err := c.fn(n.core)
			// Publish before answering, so the caller reads its own
			// change.
			n.apply(n.core.Ready())
			c.errc <- err
			continue
		}
		n.apply(n.core.Ready())
	}
}

// feedHeard tells the Core when bytes last arrived from each peer address
// and, before the join, from each seed.
func (n *Node) feedHeard() {
	for id := range n.peers {
		if at := n.tr.LastHeard(id.Addr); !at.IsZero() {
			n.core.Heard(id.Addr, at)
		}
	}
	if !n.core.Joined() {
		for _, s := range n.cfg.Seeds {
			if at := n.tr.LastHeard(s); !at.IsZero() {
				n.core.Heard(s, at)
			}
		}
	}
}

// apply does what r lists: send, forward verdicts to the transport,
// publish.
func (n *Node) apply(r Ready) {
	if c := n.core.Counts(); n.counts.Load() == nil || *n.counts.Load() != c {
		n.counts.Store(&c)
	}
	if n.core.Routable() {
		n.routableOnce.Do(func() { close(n.routable) })
	}
	for _, env := range r.Messages {
		if err := n.tr.Send(n.ctx, env.To, env.Msg); err != nil {
			n.log.Debug("membership send failed", "to", env.To, "type", env.Msg.Type.String(), "err", err)
		}
	}
	for _, e := range r.Events {
		switch e.Kind {
		case EventMemberUpdated:
			id := e.Member.ID
			if id == n.id {
				break
			}
			n.peers[id] = struct{}{}
			if e.Member.Status == StatusDead || e.Member.Status == StatusLeft {
				n.tr.PeerDead(id)
			}
		case EventMemberForgotten:
			delete(n.peers, e.Member.ID)
		}
	}
	// Records also change without an event (an incarnation, an accuser):
	// refresh the view at least once per heartbeat for those.
	now := time.Now()
	if len(r.Events) == 0 && r.MemberSet == nil && n.core.Joined() == n.joinedSeen &&
		now.Sub(n.published) < n.cfg.Timings.Heartbeat {
		return
	}
	n.published = now
	n.joinedSeen = n.core.Joined()
	n.publish(r)
}

func (n *Node) publish(r Ready) {
	members := n.core.Members()
	joined := n.core.Joined()
	n.mu.Lock()
	n.view.members = members
	if r.MemberSet != nil {
		n.view.memberSet = r.MemberSet
	}
	n.view.owning = n.core.Owning()
	n.view.healthy = n.core.Healthy()
	n.view.joined = joined
	n.view.removed = n.core.Removed()
	for _, e := range r.Events {
		for s := range n.subs {
			select {
			case s.ch <- e:
			default:
				s.missed.Add(1)
			}
		}
	}
	n.mu.Unlock()
	if joined {
		n.joinedOnce.Do(func() { close(n.joined) })
	}
}
