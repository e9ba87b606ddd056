package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// MemNetwork connects MemEndpoints in memory, with the delivery guarantees
// of the real transport (each envelope at most once, in order per sender
// and stream, receipts resolved when the handler returns, explicit
// failures on restart, death and partition past PeerDead) and none of its
// sockets. Partitions hold traffic until healed, as a broken connection
// holds it until resumed.
type MemNetwork struct {
	mu    sync.Mutex
	nodes map[string]*MemEndpoint // by address
	parts map[[2]string]bool
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{nodes: map[string]*MemEndpoint{}, parts: map[[2]string]bool{}}
}

func pairOf(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// memEnv is one envelope in flight in a MemNetwork.
type memEnv struct {
	from    ring.NodeID
	to      ring.NodeID // as addressed; Incarnation 0 means any
	known   uint64      // the peer's incarnation the sender knew when sending, 0 if none
	stream  StreamID
	payload []byte
	r       *Receipt
	ctx     context.Context
}

// MemEndpoint is one node of a MemNetwork.
type MemEndpoint struct {
	net  *MemNetwork
	self ring.NodeID

	mu        sync.Mutex
	cond      *sync.Cond
	handlers  [NumStreams]Handler
	listeners []func(PeerEvent)
	inbox     [NumStreams][]memEnv
	held      []memEnv // sent while partitioned or while the peer was absent
	heard     map[string]time.Time
	up        map[string]ring.NodeID
	suspect   map[string]bool // suspect events reported since the peer was last up
	sent      []*Receipt      // receipts that may be pending, for Shutdown
	pruneAt   int             // len(sent) at which resolved receipts are dropped from it
	draining  bool
	closed    bool
	wg        sync.WaitGroup
}

// Join adds a node. An address already in use by a closed endpoint is
// taken over: that is a restart, and what was held for the old
// incarnation fails with ErrPeerRestarted.
func (n *MemNetwork) Join(self ring.NodeID) (*MemEndpoint, error) {
	if self.Addr == "" || self.Incarnation == 0 {
		return nil, fmt.Errorf("troupe: MemNetwork.Join: identity %v needs an address and an incarnation", self)
	}
	e := &MemEndpoint{net: n, self: self, heard: map[string]time.Time{}, up: map[string]ring.NodeID{}, suspect: map[string]bool{}}
	e.cond = sync.NewCond(&e.mu)
	n.mu.Lock()
	if old := n.nodes[self.Addr]; old != nil && !old.isClosed() {
		n.mu.Unlock()
		return nil, fmt.Errorf("troupe: MemNetwork.Join: %s is in use by %v", self.Addr, old.self)
	}
	n.nodes[self.Addr] = e
	others := make([]*MemEndpoint, 0, len(n.nodes))
	for _, o := range n.nodes {
		if o != e {
			others = append(others, o)
		}
	}
	n.mu.Unlock()
	for st := range StreamID(NumStreams) {
		e.wg.Add(1)
		go e.deliver(st)
	}
	for _, o := range others {
		o.flushHeld()
	}
	return e, nil
}

// Partition holds traffic between two addresses until Heal.
func (n *MemNetwork) Partition(a, b string) {
	n.mu.Lock()
	n.parts[pairOf(a, b)] = true
	n.mu.Unlock()
}

// Heal lifts a partition; held traffic flows in order.
func (n *MemNetwork) Heal(a, b string) {
	n.mu.Lock()
	delete(n.parts, pairOf(a, b))
	nodes := []*MemEndpoint{n.nodes[a], n.nodes[b]}
	n.mu.Unlock()
	for _, e := range nodes {
		if e != nil {
			e.flushHeld()
		}
	}
}

// route returns the live endpoint at addr, unless partitioned from from.
func (n *MemNetwork) route(from, addr string) (*MemEndpoint, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.parts[pairOf(from, addr)] {
		return nil, false
	}
	e := n.nodes[addr]
	if e == nil || e.isClosed() {
		return nil, false
	}
	return e, true
}

func (e *MemEndpoint) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Release does nothing: a MemEndpoint hands handlers the sender's own
// slice, which is not its to reuse.
func (e *MemEndpoint) Release([]byte) {}

// Buffer implements Endpoint: a new buffer (nothing is pooled in memory).
func (e *MemEndpoint) Buffer(n int) []byte { return make([]byte, 0, n) }

// Self returns the endpoint's identity.
func (e *MemEndpoint) Self() ring.NodeID { return e.self }

// Handle sets the handler of a stream.
func (e *MemEndpoint) Handle(st StreamID, h Handler) {
	e.mu.Lock()
	e.handlers[st] = h
	e.mu.Unlock()
}

// OnPeerEvent adds an event listener; see Transport.OnPeerEvent.
// Listeners are called without locks held, in the order they were added.
func (e *MemEndpoint) OnPeerEvent(f func(PeerEvent)) {
	if f == nil {
		return
	}
	e.mu.Lock()
	e.listeners = append(e.listeners, f)
	e.mu.Unlock()
}

// tell calls every listener with ev, in order.
func tell(fs []func(PeerEvent), ev PeerEvent) {
	for _, f := range fs {
		f(ev)
	}
}

// Post is Send without its receipt.
func (e *MemEndpoint) Post(to ring.NodeID, st StreamID, key uint64, payload []byte) error {
	_, err := e.Send(context.Background(), to, st, key, payload)
	return err
}

// SendWait is Send: a MemEndpoint's queues are unbounded.
func (e *MemEndpoint) SendWait(ctx context.Context, to ring.NodeID, st StreamID, key uint64, payload []byte) (*Receipt, error) {
	return e.Send(ctx, to, st, key, payload)
}

// SendAfter is Send: a MemEndpoint keeps every envelope of a stream in
// the order sent, which satisfies SendAfter's order.
func (e *MemEndpoint) SendAfter(ctx context.Context, to ring.NodeID, st StreamID, key, _ uint64, payload []byte) (*Receipt, error) {
	return e.Send(ctx, to, st, key, payload)
}

// Shutdown leaves gracefully, as Transport.Shutdown: new sends fail with
// ErrClosed, and it waits until every envelope sent was taken or failed,
// or ctx ends, then closes.
func (e *MemEndpoint) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.draining = true
	sent := e.sent
	e.sent = nil
	e.mu.Unlock()
	err := waitAll(ctx, sent)
	e.Close()
	return err
}

// track remembers a receipt for Shutdown, dropping resolved ones now and
// then so the list stays as long as what is pending.
func (e *MemEndpoint) trackLocked(r *Receipt) {
	e.sent = append(e.sent, r)
	if len(e.sent) < e.pruneAt {
		return
	}
	kept := e.sent[:0]
	for _, r := range e.sent {
		if !isDone(r) {
			kept = append(kept, r)
		}
	}
	clear(e.sent[len(kept):])
	e.sent = kept
	e.pruneAt = max(64, 2*len(kept))
}

func isDone(r *Receipt) bool {
	select {
	case <-r.Done():
		return true
	default:
		return false
	}
}

// Send queues an envelope for to; see Transport.Send. A context that ends
// before the envelope reaches the peer's inbox drops it.
func (e *MemEndpoint) Send(ctx context.Context, to ring.NodeID, st StreamID, key uint64, payload []byte) (*Receipt, error) {
	if st >= NumStreams {
		return nil, fmt.Errorf("%w: %d", ErrUnknownStream, st)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e.isClosed() {
		return nil, wire.ErrClosed
	}
	env := memEnv{from: e.self, to: to, stream: st, payload: payload, r: newReceipt(), ctx: ctx}
	e.mu.Lock()
	if e.draining {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: shutting down", wire.ErrClosed)
	}
	e.trackLocked(env.r)
	env.known = e.up[to.Addr].Incarnation
	if to.Incarnation != 0 && env.known != 0 && to.Incarnation > env.known {
		// The caller learned of the peer's restart first, as
		// Transport.Send handles it: what waits for the old incarnation
		// fails, and this envelope goes to the new one.
		old := e.up[to.Addr]
		kept := e.held[:0]
		var failed []memEnv
		for _, h := range e.held {
			if h.to.Addr == to.Addr {
				failed = append(failed, h)
			} else {
				kept = append(kept, h)
			}
		}
		clear(e.held[len(kept):])
		e.held = kept
		delete(e.up, to.Addr)
		delete(e.suspect, to.Addr)
		fs := e.listeners
		e.mu.Unlock()
		err := fmt.Errorf("%w: %v is now %v", wire.ErrPeerRestarted, old, to)
		for _, h := range failed {
			h.r.resolve(err)
		}
		tell(fs, PeerEvent{Peer: old, Err: err})
		e.mu.Lock()
		env.known = 0
	}
	// Keep order behind anything already held for this peer.
	holding := false
	for _, h := range e.held {
		if h.to.Addr == to.Addr {
			holding = true
			break
		}
	}
	if holding {
		e.held = append(e.held, env)
		e.mu.Unlock()
		return env.r, nil
	}
	e.mu.Unlock()
	if err := e.offer(env); err != nil {
		return nil, err
	}
	return env.r, nil
}

// offer hands env to its peer's inbox, or holds it.
func (e *MemEndpoint) offer(env memEnv) error {
	peer, ok := e.net.route(e.self.Addr, env.to.Addr)
	if !ok {
		e.mu.Lock()
		e.held = append(e.held, env)
		prev, wasUp := e.up[env.to.Addr]
		report := wasUp && !e.suspect[env.to.Addr]
		if report {
			e.suspect[env.to.Addr] = true
		}
		fs := e.listeners
		e.mu.Unlock()
		if report {
			// As the real transport does when a redial fails.
			tell(fs, PeerEvent{Peer: prev, Suspect: true, Err: wire.ErrUnreachable})
		}
		return nil
	}
	if (env.to.Incarnation != 0 && env.to.Incarnation != peer.self.Incarnation) ||
		(env.known != 0 && env.known != peer.self.Incarnation) {
		env.r.resolve(fmt.Errorf("%w: %v is now %v", wire.ErrPeerRestarted, env.to, peer.self))
		e.noteUp(peer.self)
		return nil
	}
	if err := env.ctx.Err(); err != nil {
		env.r.resolve(err)
		return nil
	}
	peer.mu.Lock()
	if peer.closed {
		peer.mu.Unlock()
		env.r.resolve(fmt.Errorf("%w: %v left", wire.ErrPeerDead, peer.self))
		return nil
	}
	peer.inbox[env.stream] = append(peer.inbox[env.stream], env)
	peer.cond.Broadcast()
	peer.mu.Unlock()
	e.noteUp(peer.self)
	return nil
}

// flushHeld offers held envelopes again, in order, stopping at the first
// peer still unreachable for that peer's envelopes.
func (e *MemEndpoint) flushHeld() {
	e.mu.Lock()
	held := e.held
	e.held = nil
	e.mu.Unlock()
	blocked := map[string]bool{}
	for _, env := range held {
		if blocked[env.to.Addr] {
			e.mu.Lock()
			e.held = append(e.held, env)
			e.mu.Unlock()
			continue
		}
		if _, ok := e.net.route(e.self.Addr, env.to.Addr); !ok {
			blocked[env.to.Addr] = true
		}
		e.offer(env)
	}
}

func (e *MemEndpoint) noteUp(peer ring.NodeID) {
	e.mu.Lock()
	prev, was := e.up[peer.Addr]
	e.up[peer.Addr] = peer
	wasSuspect := e.suspect[peer.Addr]
	delete(e.suspect, peer.Addr)
	fs := e.listeners
	e.mu.Unlock()
	if was && prev == peer && !wasSuspect {
		return
	}
	if was && prev == peer {
		tell(fs, PeerEvent{Peer: peer, Up: true}) // reachable again
		return
	}
	if was {
		tell(fs, PeerEvent{Peer: prev, Err: wire.ErrPeerRestarted})
	}
	tell(fs, PeerEvent{Peer: peer, Up: true})
}

func (e *MemEndpoint) deliver(st StreamID) {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		for len(e.inbox[st]) == 0 && !e.closed {
			e.cond.Wait()
		}
		if e.closed {
			e.mu.Unlock()
			return
		}
		env := e.inbox[st][0]
		e.inbox[st] = e.inbox[st][1:]
		h := e.handlers[st]
		if now := time.Now(); now.After(e.heard[env.from.Addr]) {
			// Never backwards, as the transport's.
			e.heard[env.from.Addr] = now
		}
		e.mu.Unlock()
		if h != nil {
			h.Receive(env.from, env.payload)
		}
		env.r.resolve(nil)
	}
}

// PeerDead fails what this endpoint holds for the peer.
func (e *MemEndpoint) PeerDead(id ring.NodeID) {
	e.mu.Lock()
	kept := e.held[:0]
	var failed []memEnv
	for _, env := range e.held {
		if env.to.Addr == id.Addr {
			failed = append(failed, env)
		} else {
			kept = append(kept, env)
		}
	}
	e.held = kept
	_, was := e.up[id.Addr]
	delete(e.up, id.Addr)
	fs := e.listeners
	e.mu.Unlock()
	for _, env := range failed {
		env.r.resolve(fmt.Errorf("%w: declared dead", wire.ErrPeerDead))
	}
	if was {
		tell(fs, PeerEvent{Peer: id, Err: wire.ErrPeerDead})
	}
}

// LastHeard returns when an envelope from the peer was last taken from
// the inbox.
func (e *MemEndpoint) LastHeard(id ring.NodeID) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.heard[id.Addr]
	return t, ok
}

// Close leaves the network: undelivered envelopes to this endpoint fail
// with ErrPeerDead, its own held ones with ErrClosed.
func (e *MemEndpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	var lost []memEnv
	for i := range e.inbox {
		lost = append(lost, e.inbox[i]...)
		e.inbox[i] = nil
	}
	held := e.held
	e.held = nil
	e.cond.Broadcast()
	e.mu.Unlock()
	e.wg.Wait()
	for _, env := range lost {
		env.r.resolve(fmt.Errorf("%w: %v left", wire.ErrPeerDead, e.self))
	}
	for _, env := range held {
		env.r.resolve(wire.ErrClosed)
	}
	return nil
}
