// Package remote carries actor messages between the members of a cluster
// and from clients: it places each key on its owner (the ring of the
// members hosting the key's type), sends what is not served here over the
// application stream of wire, routes replies back to the asker, and
// serves the requests other nodes send here. It implements host.Remote,
// the seam between the typed runtime (package actor) and the cluster.
package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// Config configures a Router.
type Config struct {
	Endpoint transport.Endpoint
	// Host runs the actors of this node; a client's host serves none.
	Host *host.Host
	// Serve is set on members: they serve keys and answer clients'
	// membership syncs.
	Serve  bool
	Logger *slog.Logger
	// OnMembers, for clients, receives the member lists that members
	// send in answer to Sync and when membership changes (see sync.go).
	// It may be given the same list again, when the member says its list
	// is unchanged: it must not modify members.
	OnMembers func(from ring.NodeID, members []cluster.Member)
	// Silence, when set, is how long a member's link may stay silent (no
	// byte heard) before this node relays what it sends that member
	// through another member (see relay.go). The transport's keepalive
	// must keep live links less silent than that
	// (cluster.Config.WireSilence).
	Silence time.Duration
	// Handoff, when set, is how long after a change of the member set a
	// new owner drains a key from its previous owner before running it
	// (see handoff.go), and the most it holds the key's messages waiting:
	// the bound of an orderly leave's drain (system.Config.LeaveTimeout).
	Handoff time.Duration
}

// Router implements host.Remote over a transport.Endpoint.
type Router struct {
	cfg  Config
	ep   atomic.Pointer[endpoint] // swapped by SetEndpoint
	h    *host.Host
	log  *slog.Logger
	view atomic.Pointer[view]
	// before is the view this one replaced (MoveOut compares them), and
	// prevRings each type's ring before its latest change, kept until the
	// next one (PreviousReplicas).
	before    atomic.Pointer[view]
	prevRings atomic.Pointer[map[string]*ring.Ring]

	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	nextID  atomic.Uint64
	started time.Time // for monotonic durations kept as integers

	// silent holds the members whose links are silent, with the last
	// time they were heard (see relay.go); never nil.
	silent atomic.Pointer[map[ring.NodeID]time.Time]
	// relayed counts the messages sent through a relay (see Relays).
	relayed atomic.Uint64

	// Hand-off (see handoff.go): the view before the last change, the
	// keys held for their previous owners (by holdID), the drain requests
	// (by id), the keys handed over since the change.
	handoff atomic.Pointer[handoff]
	holds0  atomic.Int32 // len(holds)
	// holdsStarted counts the holds ever started, for freeKey.
	holdsStarted atomic.Uint64
	changes      atomic.Uint64 // counts the views noteChange saw (see freeKey)
	hmu          sync.Mutex
	holds        map[holdKey]*hold
	drains       map[uint64]holdKey
	confirmed    map[holdKey]struct{}
	joinedAt     time.Time // when this node's view first listed another member
	drainsN      int       // drain requests sent, for tests

	// outboxes holds the outbox of each peer; it is replaced whole,
	// under outboxMu, when a peer is added (rarely), so that a send looks
	// it up without a lock. inboxes holds an *inbox per peer.
	outboxMu sync.Mutex
	outboxes atomic.Pointer[map[ring.NodeID]*outbox]
	// lastOut is the outbox outboxFor found last: an ask and its reply go
	// to one peer, and the check spares the map's hash of a NodeID (its
	// address string). Cleared with outboxes.
	lastOut atomic.Pointer[outbox]
	epoch   atomic.Uint64 // counts endpoints: outboxes of an older one are dropped
	inboxes sync.Map
	// routes holds the *route of each actor type (by name) that sent or
	// received here.
	routes sync.Map

	mu      sync.Mutex
	closed  bool
	pending map[uint64]*pending        // asks sent from here
	serving map[servedKey]*served      // asks other nodes sent here
	clients map[ring.NodeID]subscriber // clients to push member lists to
	// heard holds, on a client, the list last had from each member
	// (see sync.go).
	heard map[ring.NodeID]heardList
	// listsDecoded counts the member lists decoded here (ListsDecoded),
	// noticesSent the placement versions sent to clients unasked (for
	// tests).
	listsDecoded, noticesSent atomic.Uint64
	changed                   chan struct{} // closed and replaced when the view changes

	// replying holds the replies to asks of other nodes that went alone
	// (see largeEnvelope) and that the asker has not taken yet: a cancel
	// drops what of them was not written.
	replying map[servedKey]*replyOut
	// answering counts the answers of served asks not yet queued for
	// their askers; retired is set once Retire told the peers that this
	// node runs no more of their asks.
	answering int
	retired   atomic.Bool // set under mu
	// idle, while Retire waits, is closed once serving, replying and
	// answering are all empty (idleLocked).
	idle chan struct{}
	// retiredLanes holds, per peer, the lanes on which it said it retired
	// (bit i: lane i), until the view no longer holds it; graces the
	// timers of the peers that left before saying so on every lane.
	retiredLanes map[ring.NodeID]uint16
	graces       map[ring.NodeID]*time.Timer
	// unanswered holds, per asker, the lanes on which a reply to it could
	// not be sent: Retire says nothing on them.
	unanswered map[ring.NodeID]uint16
}

// maxRetries bounds how often an ask is sent again after a member said
// it does not own the key (or left before answering). Views converge
// within a gossip round or two, but not at once on every member: a retry
// waits at least retryBackoff<<retries (so the members it asks catch up
// too) and, up to retryWait, for this node's own view to change.
const (
	maxRetries   = 5
	retryBackoff = 5 * time.Millisecond
	retryWait    = 250 * time.Millisecond
)

// clientExpiry is how long a client stays subscribed to member-list
// pushes after its last sync (clients sync every few seconds), and how
// long a peer not in the view may stay silent before the router forgets
// it (see prune.go).
const clientExpiry = time.Minute

// pending is an ask waiting for its reply.
type pending struct {
	id     uint64
	to     ring.NodeID
	out    host.Outbound
	r      *Router
	done   host.Replier
	direct bool // never relayed: a relay's own ask (see relayAsk)
	// The fields below are read and written under r.mu: the send that
	// placed p may still be writing it out when a retirement or an
	// answer from where it went hands p to a retry (see dispatchIn).
	retries int         // sends after the first, at most maxRetries
	prev    ring.NodeID // the node that answered it does not own the key
	hint    ring.NodeID // ... and the owner it named
	placed  uint64      // counts the times p was enlisted
	// unsend drops what was not written of the request, when it went
	// alone (see largeEnvelope); nil otherwise. Set under r.mu.
	unsend context.CancelFunc
}

// replyOut is a reply that went alone, until the asker took it.
type replyOut struct{ unsend context.CancelFunc }

type servedKey struct {
	from ring.NodeID
	id   uint64
}

// served is an ask being handled here for another node.
type served struct {
	r         *Router
	sk        servedKey
	cancel    host.Withdrawer
	timer     *time.Timer
	done      bool
	cancelled bool // withdrawn before its cancel was known: serveAsk cancels it
}

// stopLocked marks s cancelled and returns what stops it, to call once
// r.mu is released. r.mu held.
func (s *served) stopLocked() func() {
	s.cancelled = true
	cancel, timer := s.cancel, s.timer
	return func() {
		if timer != nil {
			timer.Stop()
		}
		if cancel != nil {
			cancel.Withdraw()
		}
	}
}

var _ host.Remote = (*Router)(nil)

// New returns a router and registers its handler for the application
// stream: call it before the endpoint carries traffic.
func New(cfg Config) *Router {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Router{cfg: cfg, h: cfg.Host, log: cfg.Logger, ctx: ctx, cancel: cancel,
		pending: map[uint64]*pending{}, serving: map[servedKey]*served{}, clients: map[ring.NodeID]subscriber{}, heard: map[ring.NodeID]heardList{}, started: time.Now(),
		changed: make(chan struct{}),
		holds:   map[holdKey]*hold{}, drains: map[uint64]holdKey{}, confirmed: map[holdKey]struct{}{},
		replying: map[servedKey]*replyOut{}, retiredLanes: map[ring.NodeID]uint16{}, graces: map[ring.NodeID]*time.Timer{}, unanswered: map[ring.NodeID]uint16{}}
	r.view.Store(newView(cfg.Endpoint.Self(), false, nil))
	r.ep.Store(&endpoint{cfg.Endpoint})
	r.silent.Store(new(map[ring.NodeID]time.Time))
	cfg.Endpoint.Handle(transport.StreamApplication, receiver{r})
	if cfg.Silence > 0 {
		go r.watchSilence(cfg.Silence)
	}
	go r.prune()
	return r
}

// receiver is the router's handler of the application stream.
type receiver struct{ r *Router }

// Receive implements transport.Handler.
func (h receiver) Receive(from ring.NodeID, payload []byte) { h.r.receive(from, payload, nil) }

// ReceiveDefer implements transport.DeferHandler: an ask that finds its actor
// idle runs in then, after the transport released the batch (see inbox).
func (h receiver) ReceiveDefer(from ring.NodeID, payload []byte) (then func(relieve func())) {
	h.r.receive(from, payload, &then)
	return then
}

// Quick implements transport.QuickHandler: a batch of replies only completes
// pending asks, which never waits, so the transport's reader delivers it without
// its relief watch (on an asker, the watch's timer would fire every
// millisecond while asks go on).
func (h receiver) Quick(payload []byte) bool {
	for b := payload; len(b) > 0; {
		p, rest, ok := nextInBatch(b)
		if !ok || len(p) < 2 || p[0] != envelopeVersion || p[1] != kindReply {
			return false
		}
		b = rest
	}
	return len(payload) > 0
}

// endpoint boxes the current transport.Endpoint for the atomic pointer.
type endpoint struct{ transport.Endpoint }

// endpoint returns the endpoint the router sends through now.
func (r *Router) endpoint() transport.Endpoint { return r.ep.Load().Endpoint }

// self returns this node's identity on the current endpoint.
func (r *Router) self() ring.NodeID { return r.endpoint().Self() }

// SetEndpoint makes the router send and receive through ep, a new
// incarnation of this node (a member that rejoins the cluster): it
// registers its handler on ep (call it before ep carries traffic), drops
// the per-peer batches and workers of the old endpoint, fails the asks
// still waiting with fault.ErrUnavailable (their replies would reach the
// old identity) and cancels the requests served for other nodes. Call
// Update next with the new identity.
func (r *Router) SetEndpoint(ep transport.Endpoint) {
	ep.Handle(transport.StreamApplication, receiver{r})
	old := r.ep.Swap(&endpoint{ep}).Endpoint
	r.hmu.Lock()
	r.joinedAt = time.Now() // a new incarnation owns nothing yet: see handoff.go
	r.hmu.Unlock()
	r.outboxMu.Lock()
	r.outboxes.Store(nil)
	r.lastOut.Store(nil)
	r.epoch.Add(1)
	r.outboxMu.Unlock()
	r.inboxes.Clear()
	r.mu.Lock()
	pend := r.pending
	var stops []func()
	if !r.closed {
		for _, sv := range r.serving {
			stops = append(stops, sv.stopLocked())
		}
		r.pending, r.serving = map[uint64]*pending{}, map[servedKey]*served{}
		r.idleLocked()
	} else {
		pend = nil
	}
	r.mu.Unlock()
	for _, p := range pend {
		p.done.Reply(nil, fmt.Errorf("%w: this member rejoined the cluster as %v (was %v)", fault.ErrUnavailable, ep.Self(), old.Self()))
	}
	for _, stop := range stops {
		stop()
	}
}

// SetHost sets the host whose kinds serve incoming requests, when the
// router had to exist before it.
func (r *Router) SetHost(h *host.Host) { r.h = h }

// maxMessage is the host's message limit; 0: none.
func (r *Router) maxMessage() int {
	if r.h == nil {
		return 0
	}
	return r.h.MaxMessage
}

// Update replaces the placement view. Asks waiting on members that are
// now dead or gone fail with fault.ErrUnavailable, and clients that
// subscribed get the new list.
// It reports whether the view changed.
func (r *Router) Update(self ring.NodeID, owning bool, members []cluster.Member) bool {
	old := r.view.Load()
	if old.self == self && old.owning == owning && len(old.list) > 0 &&
		slices.EqualFunc(old.list, members, cluster.Member.Equal) {
		return false
	}
	v := newView(self, owning, members)
	r.before.Store(old)
	r.notePrevRings(old, v)
	r.view.Store(v)
	r.noteChange(old, v)
	var failed, again []*pending
	now := time.Now()
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	for c, sub := range r.clients {
		if sub.expired(now) {
			delete(r.clients, c)
		}
	}
	for id := range r.heard {
		if _, ok := v.status[id]; !ok {
			delete(r.heard, id) // no longer in the view: nothing comes from it
		}
	}
	var orphans []func()
	for sk, sv := range r.serving {
		// The asker was declared dead: it failed or forgot the ask, and
		// a handler still running for it would hold its key.
		if v.gone(sk.from) {
			delete(r.serving, sk)
			orphans = append(orphans, sv.stopLocked())
		}
	}
	r.idleLocked()
	var againTo []ring.NodeID
	var refused []*pending
	for id, p := range r.pending {
		if !v.gone(p.to) {
			continue
		}
		retired := r.retiredLanes[p.to]&(1<<laneOf(id)) != 0
		safe := p.out.ReadOnly || p.out.IdempotencyKey != "" || retired
		if safe && p.retries < maxRetries {
			// Running it twice is harmless (actor.ReadOnly), or its
			// owner answers it again from what it kept (an idempotency
			// key: see actor.WithIdempotencyKey), or the member retired
			// before it left: it never ran the ask (see Retire). Place
			// it again, on the key's new owner; it stays withdrawable
			// meanwhile (see redispatch).
			p.retries++
			again, againTo = append(again, p), append(againTo, p.to)
			p.to = ring.NodeID{}
			continue
		}
		if retired {
			// It never ran there, but it was placed too often already.
			delete(r.pending, id)
			refused = append(refused, p)
			continue
		}
		if r.graces[p.to] != nil {
			continue // waiting for the leaver's retirement (a later view may not say it left in order)
		}
		if v.leftInOrder(old, p.to) {
			// It left in order, so it says it retired, on every lane,
			// before it leaves: that may still be on its way. The ask
			// waits for it, briefly (see retireGrace).
			if r.graces[p.to] == nil {
				to := p.to
				r.graces[to] = time.AfterFunc(r.retireGrace(), func() { r.graceOver(to) })
			}
			continue
		}
		// Any other ask may have run: its owner died, or a newer process
		// at its address replaced it (it was killed and restarted: the
		// chaos run's write applied twice).
		delete(r.pending, id)
		failed = append(failed, p)
	}
	for id := range r.retiredLanes {
		if _, ok := v.status[id]; !ok {
			delete(r.retiredLanes, id)
		}
	}
	for id := range r.unanswered {
		_, member := v.status[id]
		if _, client := r.clients[id]; !member && !client {
			delete(r.unanswered, id) // gone: nothing of it waits
		}
	}
	clients := make([]ring.NodeID, 0, len(r.clients))
	versioned := make([]bool, 0, len(r.clients))
	for c, sub := range r.clients {
		clients, versioned = append(clients, c), append(versioned, sub.versioned)
	}
	r.mu.Unlock()
	for _, stop := range orphans {
		stop()
	}
	for _, p := range refused {
		p.done.Reply(nil, fmt.Errorf("%w: %s/%s: %d members in turn would not serve it", fault.ErrUnavailable, p.out.Type, p.out.Key, maxRetries+1))
	}
	for _, p := range failed {
		p.done.Reply(nil, fault.OutcomeUnknown("owner %v is down or left before answering; the request may have run", p.to))
		// Should the owner be alive after all (a partition), it drops the
		// request when the cancel gets through.
		r.send(p.to, p.out.Token, &envelope{kind: kindCancel, id: p.id}, false)
	}
	for i, p := range again {
		// Should the leaver still be there, it drops its copy.
		r.send(againTo[i], p.out.Token, &envelope{kind: kindCancel, id: p.id}, false)
		if err := r.redispatch(p.id, p); err != nil {
			p.done.Reply(nil, err)
		}
	}
	if len(clients) > 0 && r.cfg.Serve {
		r.push(v, clients, versioned)
	}
	return true
}

// MoveOut ends the local activations of the keys this node no longer
// serves under the current view.
func (r *Router) MoveOut() {
	if r.h == nil {
		return
	}
	for _, k := range r.h.Kinds() {
		m, ok := k.(host.Mover)
		if !ok {
			continue
		}
		typ := k.Name()
		rk := r.kind(typ)
		cur, old := r.view.Load(), r.before.Load()
		var a, b []ring.NodeID
		m.Moved(func(key string) bool {
			// Placement only: a key held for its previous owner (Here
			// says no) has no activation here to end anyway.
			tok := r.Token(typ, key)
			_, here, err := cur.dest(rk, typ, key, tok)
			if !here || err != nil {
				return false
			}
			// A replicated key whose replica set changed ends too: its
			// owner writes to the set it acquired, and only a new
			// acquisition, joint with the previous set, moves it to the
			// new one (docs/replication.md, "Owner rules").
			if n := rk.Replicas(); n > 1 && old != nil && old.rings[typ] != nil && cur.rings[typ] != nil {
				a, b = old.replicas(a[:0], typ, tok, n), cur.replicas(b[:0], typ, tok, n)
				return slices.Equal(a, b)
			}
			return true
		})
	}
}

// Members returns the member list of the current view.
func (r *Router) Members() []cluster.Member { return r.view.Load().list }

// Close fails the asks still waiting with fault.ErrSystemClosed and
// cancels the requests being served for other nodes.
func (r *Router) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	if r.idle != nil { // a Retire waiting sees the close
		close(r.idle)
		r.idle = nil
	}
	for _, t := range r.graces {
		t.Stop()
	}
	pend := r.pending
	var stops []func()
	for _, sv := range r.serving {
		stops = append(stops, sv.stopLocked())
	}
	r.pending, r.serving = map[uint64]*pending{}, map[servedKey]*served{}
	r.mu.Unlock()
	r.hmu.Lock()
	var wakes []func(bool)
	for _, h := range r.holds {
		h.timer.Stop()
		for _, it := range h.items {
			if it.wake != nil {
				wakes = append(wakes, it.wake)
			}
		}
	}
	r.hmu.Unlock()
	for _, w := range wakes {
		w(true) // a held wake hears of the close: nothing more is served
	}
	if ho := r.handoff.Load(); ho != nil && ho.timer != nil {
		ho.timer.Stop()
	}
	r.cancel()
	for _, p := range pend {
		p.done.Reply(nil, fault.ErrSystemClosed)
	}
	for _, stop := range stops {
		stop()
	}
}

// Token implements host.Remote.
func (r *Router) Token(typ, key string) uint64 { return uint64(ring.KeyToken(typ, key)) }

func (r *Router) kind(typ string) host.RemoteKind {
	if r.h == nil {
		return nil
	}
	k, _ := r.h.Kind(typ).(host.RemoteKind)
	return k
}

// Dest returns the member serving typ/key now, and whether it is this node.
func (r *Router) Dest(typ, key string, tok uint64) (ring.NodeID, bool, error) {
	return r.view.Load().dest(r.kind(typ), typ, key, tok)
}

// tellTo sends a tell to the member to, or serves it here.
func (r *Router) tellTo(to ring.NodeID, here bool, out host.Outbound) error {
	e := envelope{kind: kindTell, token: out.Token, typ: out.Type, key: out.Key, name: out.Name, body: out.Body, trace: out.Trace}
	if here { // placement changed since the caller looked
		return r.serveTell(r.self(), &e)
	}
	if r.isSilent(to) {
		if via, ok := r.relayFor(r.view.Load(), to, out.Type, out.Token); ok {
			to = via // a non-owner: it forwards the tell once
			r.relayed.Add(1)
		}
	}
	// The message outlives the caller's context: a tell is done once
	// queued, like a local one.
	return r.send(to, out.Token, &e, false)
}

// Ask implements host.Remote.
func (r *Router) Ask(ctx context.Context, out host.Outbound, to host.Replier) (host.Withdrawer, error) {
	id := r.nextID.Add(1)
	out.Body = append([]byte(nil), out.Body...) // kept for a retry
	p := &pending{id: id, r: r, out: out, done: to}
	if err := r.dispatch(id, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Withdraw implements host.Withdrawer.
func (p *pending) Withdraw() { p.r.withdraw(p.id) }

// dispatch sends (or serves here) the ask p under id.
func (r *Router) dispatch(id uint64, p *pending) error { return r.dispatchAs(id, p, false) }

// leftInOrder reports whether id left in order, draining what it had
// accepted: its record in v says left, and the view before said it was
// leaving or no newer process holds its address. One retired by a newer
// process at its address died. A view can go from alive to left in one
// step for an orderly leave (both records arrived between two updates),
// hence the second test. What such a leaver never ran, it says (see
// Retire).
func (v *view) leftInOrder(before *view, id ring.NodeID) bool {
	if v.status[id] != cluster.StatusLeft {
		return false
	}
	if before.status[id] == cluster.StatusLeaving {
		return true
	}
	for _, m := range v.list {
		if m.ID.Addr == id.Addr && m.ID.Incarnation > id.Incarnation {
			return false
		}
	}
	return true
}

// redispatch sends the ask p under id again. p waits in r.pending
// meanwhile (with no destination), so that a withdraw at any moment
// either finds it there, and it is not sent, or finds it sent, and
// cancels it where it went: an ask the asker gave up on never runs
// again elsewhere.
func (r *Router) redispatch(id uint64, p *pending) error { return r.dispatchAs(id, p, true) }

func (r *Router) dispatchAs(id uint64, p *pending, again bool) error {
	for {
		err := r.dispatchIn(r.view.Load(), id, p, again)
		if !errors.Is(err, errViewChanged) {
			return err
		}
	}
}

// dispatchIn is dispatchAs under view v. It returns errViewChanged, having
// sent nothing, when the view changed before the ask was enlisted.
func (r *Router) dispatchIn(v *view, id uint64, p *pending, again bool) error {
	out := p.out
	to, here, err := v.dest(r.kind(out.Type), out.Type, out.Key, out.Token)
	if err != nil {
		if again && r.take(id) != p {
			return nil // withdrawn meanwhile: its asker is gone
		}
		return err
	}
	if again {
		r.mu.Lock()
		retries, prev, hint := p.retries, p.prev, p.hint
		r.mu.Unlock()
		if retries > 0 && to == prev && !hint.IsZero() && serves(v.statusOr(hint, cluster.StatusAlive)) {
			// This node's view still names the node that said no:
			// believe that node's view, which changed first.
			to, here = hint, hint == v.self
		}
	}
	e := &envelope{kind: kindAsk, id: id, token: out.Token, typ: out.Type, key: out.Key, name: out.Name, body: out.Body, chain: out.Chain, rid: out.RequestID, idem: out.IdempotencyKey, trace: out.Trace}
	if !out.Deadline.IsZero() {
		e.ttl = max(int64(time.Until(out.Deadline)), 1)
	}
	if !here && !p.direct && r.isSilent(to) {
		if via, ok := r.relayFor(v, to, out.Type, out.Token); ok {
			to, e.hops = via, 1 // the relay answers: see relay.go
			r.relayed.Add(1)
		}
	}
	var u unsent
	var unsend context.CancelFunc
	if !here && len(e.body) > largeEnvelope {
		// It goes alone: withdrawn, what of it was not written is
		// dropped. (A context of Background's needs no cancel to be
		// collected.)
		u.ctx, unsend = context.WithCancel(context.Background())
	}
	placed, err := r.enlist(v, id, p, to, again, unsend)
	if err != nil {
		if errors.Is(err, errWithdrawn) {
			return nil
		}
		return err
	}
	if here {
		r.serveAsk(r.self(), e, nil, nil)
		return nil
	}
	if err := r.outboxFor(to).enqueueBody(out.Token, e, nil, nil, true, u); err != nil {
		if !r.takePlaced(id, p, to, placed) {
			// While this send waited, to retired on the ask's lane or
			// was declared gone, and the ask went elsewhere: that
			// placement answers it.
			return nil
		}
		return err
	}
	return nil
}

// takePlaced takes the ask p out of r.pending if it is still at to, where
// its placement number placed put it, and reports whether it did: not
// while it waits to be placed again (at no member), nor once placed again.
func (r *Router) takePlaced(id uint64, p *pending, to ring.NodeID, placed uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[id] != p || p.to != to || p.placed != placed {
		return false
	}
	delete(r.pending, id)
	return true
}

// enlist records the ask p as pending at to, placed under view v. Update
// stores a new view before it looks for the asks pending at members that
// view says are gone, under r.mu: so if the view is still v here, under
// r.mu, a later change finds p; otherwise the change may have looked
// already, and enlist returns errViewChanged for p to be placed again
// (an ask enlisted at a member that left meanwhile would wait for an
// answer that never comes). It returns errWithdrawn if p was withdrawn
// (or failed) while it waited to be sent again. It returns the
// placement's number: what p.placed is while p stays placed there.
func (r *Router) enlist(v *view, id uint64, p *pending, to ring.NodeID, again bool, unsend context.CancelFunc) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if again && r.pending[id] != p {
		return 0, errWithdrawn
	}
	if r.closed {
		delete(r.pending, id)
		return 0, fault.ErrSystemClosed
	}
	if r.view.Load() != v {
		return 0, errViewChanged
	}
	p.to, p.unsend = to, unsend
	p.placed++
	r.pending[id] = p
	return p.placed, nil
}

// withdraw is the asker giving up on request id.
func (r *Router) withdraw(id uint64) {
	p := r.take(id)
	if p == nil {
		return
	}
	if p.to == r.self() {
		r.cancelServed(servedKey{from: p.to, id: id})
		return
	}
	if p.to.IsZero() {
		return // waiting to be sent again: nothing out there
	}
	if p.unsend != nil {
		p.unsend() // what of the request was not written stays here
	}
	// The request may sit in a batch or on the owner: the cancel follows
	// it on the same lane (or divert key), so it arrives after it, and
	// the owner drops the reply, or what of it was not written.
	r.send(p.to, p.out.Token, &envelope{kind: kindCancel, id: id}, false)
}

func (r *Router) take(id uint64) *pending {
	r.mu.Lock()
	p := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	return p
}

// send queues e for to in the lane of key (see outbox); now sends the
// lane at once, for envelopes someone waits on.
func (r *Router) send(to ring.NodeID, key uint64, e *envelope, now bool) error {
	return r.outboxFor(to).enqueue(key, e, now)
}

func unavailable(to ring.NodeID, err error) error {
	if errors.Is(err, wire.ErrClosed) {
		return fmt.Errorf("%w: %w", fault.ErrSystemClosed, err)
	}
	if errors.Is(err, wire.ErrMessageTooLarge) {
		// Permanent: no member would take it.
		return fmt.Errorf("%w: send to %v: %w", fault.ErrMessageTooLarge, to, err)
	}
	if errors.Is(err, wire.ErrQueueFull) {
		// The link to the owner is backed up: like a full mailbox, a
		// reason to retry later.
		return fmt.Errorf("%w: send to %v: %w", fault.ErrMailboxFull, to, err)
	}
	return fmt.Errorf("%w: send to %v: %w", fault.ErrUnavailable, to, err)
}

// receive handles one batch of the application stream.
// It is stage one of receiving (see inbox). With then set, the first ask
// served at once may leave the run of its handler in *then.
func (r *Router) receive(from ring.NodeID, payload []byte, then *func(relieve func())) {
	b := r.enter(from)
	defer b.users.Add(-1)
	seg := -1 // offset of the envelopes kept for the worker, or -1
	off := 0
	tells := true // every envelope so far is a tell
	for off < len(payload) {
		p, rest, ok := nextInBatch(payload[off:])
		if !ok {
			r.log.Warn("troupe: dropped the rest of an application batch", "from", from, "err", fmt.Errorf("%w: batch framing", ErrMalformed))
			break
		}
		end := len(payload) - len(rest)
		if len(p) < 2 || p[0] != envelopeVersion || (p[1] != kindTell && p[1] != kindTellNext && p[1] != kindTell|traced) {
			tells = false
		}
		if r.sort(b, p, seg >= 0, then) {
			if seg < 0 {
				seg = off
			}
		} else if seg >= 0 {
			// Served here: what was kept before goes to the worker now.
			b.push(segment{b: payload[seg:off]})
			seg = -1
		}
		off = end
	}
	if seg >= 0 {
		b.push(segment{b: payload[seg:off], whole: tells && seg == 0 && off == len(payload)})
	}
}

// sort reports whether envelope p goes to the worker: a tell, or an ask
// or cancel behind earlier work (more reports that the batch holds some).
// Otherwise it serves p at once.
func (r *Router) sort(b *inbox, p []byte, more bool, then *func(relieve func())) bool {
	if len(p) >= 2 && p[0] == envelopeVersion {
		switch p[1] {
		case kindTell, kindTellNext, kindTell | traced:
			return true
		case kindAsk, kindCancel, kindAsk | traced:
			if more || b.busy() {
				return true
			}
		}
	}
	var e envelope
	was := b.asked.Load()
	if err := e.decodeAfter(p, was); err != nil {
		r.log.Warn("troupe: dropped application envelope", "from", b.from, "err", err)
		return false
	}
	switch e.kind {
	case kindAsk:
		if was == nil || was.typ != e.typ || was.key != e.key || was.name != e.name {
			b.asked.Store(&tellHead{typ: e.typ, key: e.key, name: e.name})
		}
		r.serveAsk(b.from, &e, then, &b.askFree)
	case kindCancel:
		r.serveQueued(b.from, &e, &b.askFree)
	default:
		r.receiveOther(b.from, &e)
	}
	return false
}

// serveQueued serves an ask or a cancel, in stage two or (the worker
// idle) at once; tells go to their kind in runs (inbox.serve).
func (r *Router) serveQueued(from ring.NodeID, e *envelope, free *atomic.Pointer[freeKey]) {
	switch e.kind {
	case kindAsk:
		r.serveAsk(from, e, nil, free)
	case kindCancel:
		r.cancelServed(servedKey{from: from, id: e.id})
	}
}

// receiveOther handles the envelopes that no order ties to the others.
func (r *Router) receiveOther(from ring.NodeID, e *envelope) {
	switch e.kind {
	case kindReply:
		r.reply(from, e)
	case kindSync, kindSyncSince:
		if r.cfg.Serve {
			r.serveSync(from, e)
		}
	case kindDrain:
		if r.cfg.Serve {
			r.serveDrain(from, e)
		}
	case kindDrained:
		r.drained(from, e)
	case kindRetired:
		r.retiredOn(from, e.id)
	case kindMembers, kindMembersV:
		if r.cfg.OnMembers != nil {
			r.membersFrom(from, e)
		}
	case kindVersion:
		if r.cfg.OnMembers != nil {
			r.versionFrom(from, e)
		}
	}
}

// serveTell queues a tell here, or forwards it once to the owner this
// node believes in.
func (r *Router) serveTell(from ring.NodeID, e *envelope) error {
	k, ok := r.tellHere(from, e, r.routeOf(e.typ), nil)
	if !ok {
		return nil
	}
	if _, err := k.DeliverRemote(host.Inbound{Key: e.key, Name: e.name, Body: e.body, Trace: e.trace}); err != nil {
		return r.dropped(e, err)
	}
	return nil
}

// tellHere decides where a received tell goes, rt being the route of
// its type (nil: none here): it returns the kind that queues it here,
// or forwards it once to the owner this node believes in, or drops it
// (reporting MessageDropped), or holds it for a key being handed over.
// free is the caller's freeKey, or nil (see holdIfNeeded).
func (r *Router) tellHere(from ring.NodeID, e *envelope, rt *route, free *freeKey) (host.RemoteKind, bool) {
	return r.tellHereHold(from, e, rt, true, free)
}

// tellHereHold is tellHere; hold says whether the tell may be held for a
// key being handed over (not when it was held already).
func (r *Router) tellHereHold(from ring.NodeID, e *envelope, rt *route, hold bool, free *freeKey) (host.RemoteKind, bool) {
	if rt == nil || !r.cfg.Serve {
		r.dropped(e, fmt.Errorf("%w: %q is not hosted here", fault.ErrUnknownActor, e.typ))
		return nil, false
	}
	to, here, err := rt.dest(e.key, e.token)
	if err != nil {
		r.dropped(e, err)
		return nil, false
	}
	if here {
		if hold && r.holdIfNeeded(from, rt.k, e, free) {
			return nil, false
		}
		return rt.k, true
	}
	if e.hops > 0 {
		r.dropped(e, fmt.Errorf("%w: forwarded once already; owner now %v", fault.ErrUnavailable, to))
		return nil, false
	}
	r.noticeStale(from) // a client's view may be stale
	e.hops++
	if err := r.send(to, e.token, e, false); err != nil {
		r.log.Debug("troupe: tell not forwarded", "from", from, "to", to, "err", err)
	}
	return nil, false
}

func (r *Router) dropped(e *envelope, err error) error {
	if r.h != nil {
		r.h.Emit(host.Event{Kind: host.MessageDropped, Type: e.typ, Key: e.key, Reason: "from another node: " + err.Error(), Err: err})
	}
	return err
}

// inlineKind is implemented by kinds that can run an ask's handler on
// the receiving goroutine (the runtime's DeliverRemoteInline).
type inlineKind interface {
	DeliverRemoteInline(in host.Inbound) (cancel host.Withdrawer, run func(relieve func()), err error)
}

// serveAsk queues a request here and sends its outcome back to from. With
// then set and *then nil, a handler the kind lets the caller run goes to
// *then, for the caller to run once it released the batch.
func (r *Router) serveAsk(from ring.NodeID, e *envelope, then *func(relieve func()), free *atomic.Pointer[freeKey]) {
	r.serveAskHold(from, e, true, then, free)
}

// serveAskHold is serveAsk; hold says whether the ask may be held for a
// key being handed over (not when it was held already).
func (r *Router) serveAskHold(from ring.NodeID, e *envelope, hold bool, then *func(relieve func()), free *atomic.Pointer[freeKey]) {
	id := e.id
	fail := func(err error) { r.answer(from, id, nil, err) }
	k := r.kind(e.typ)
	if k == nil || !r.cfg.Serve {
		fail(fmt.Errorf("%w: %q is not hosted on %v", fault.ErrUnknownActor, e.typ, r.self()))
		return
	}
	v := r.view.Load()
	if len(v.list) == 0 {
		// Not joined yet: the asker placed the key on the process that
		// was at this address before, or on this one too early. "Not the
		// owner" makes it place the ask again once its view changes,
		// where "not joined" would fail it.
		fail(&notOwnerError{})
		return
	}
	if r.retired.Load() {
		// Leaving, it told its askers it runs nothing more (relays and
		// held asks included): "not the owner" has the asker place the
		// ask again, elsewhere. (Checked again below, under r.mu.)
		fail(&notOwnerError{})
		return
	}
	to, here, err := v.dest(k, e.typ, e.key, e.token)
	if err != nil {
		fail(err)
		return
	}
	if !here {
		if e.hops == 1 {
			r.relayAsk(from, e) // relayed around a broken link
			return
		}
		fail(&notOwnerError{hint: to.String()})
		r.noticeStale(from) // a client's view may be stale
		return
	}
	if hold && r.holdIfNeededShared(from, k, e, free) {
		return
	}
	sk := servedKey{from: from, id: id}
	s := &served{r: r, sk: sk}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		fail(fault.ErrSystemClosed)
		return
	}
	if r.retired.Load() {
		// Leaving, it told its askers it runs nothing more: "not the
		// owner" has the asker place the ask again, elsewhere.
		r.mu.Unlock()
		fail(&notOwnerError{})
		return
	}
	r.serving[sk] = s
	r.mu.Unlock()
	in := host.Inbound{Key: e.key, Name: e.name, Body: e.body, Chain: e.chain, RequestID: e.rid, IdempotencyKey: e.idem, Trace: e.trace, Reply: s}
	var ttl time.Duration
	if e.ttl > 0 {
		ttl = time.Duration(e.ttl)
		in.Deadline = time.Now().Add(ttl)
	}
	var cancel host.Withdrawer
	var run func(relieve func())
	if ik, ok := k.(inlineKind); ok && then != nil && *then == nil && len(e.body) <= largeEnvelope {
		cancel, run, err = ik.DeliverRemoteInline(in)
	} else {
		cancel, err = k.DeliverRemote(in)
	}
	if err != nil {
		r.mu.Lock()
		delete(r.serving, sk)
		r.idleLocked()
		r.mu.Unlock()
		fail(err)
		return
	}
	if run != nil {
		dl := in.Deadline // not in: a closure keeps a value that large by reference, on the heap
		// Registered below before it runs, so a cancel finds it; a
		// cancelled one runs too, and drops the message. Its deadline is
		// watched only if the handler returns without a reply: a timer
		// armed for every ask costs more than an inline run, and a
		// handler that blocks instead still sees its deadline in its
		// Context and the asker's cancel (which the relieved reader
		// delivers).
		*then = func(relieve func()) {
			run(relieve)
			if ttl > 0 {
				r.mu.Lock()
				if !s.done && !s.cancelled && r.serving[sk] == s {
					s.timer = time.AfterFunc(max(time.Until(dl), 0), func() { r.cancelServed(sk) })
				}
				r.mu.Unlock()
			}
		}
	}
	r.mu.Lock()
	if s.cancelled {
		// Withdrawn while it was being queued: drop it now.
		r.mu.Unlock()
		cancel.Withdraw()
		return
	}
	if !s.done {
		s.cancel = cancel
		if ttl > 0 && run == nil {
			// The asker stops waiting at its deadline; should its cancel
			// be lost, stop here too.
			s.timer = time.AfterFunc(ttl, func() { r.cancelServed(sk) })
		}
	}
	r.mu.Unlock()
}

// Reply implements host.Replier: the outcome of the ask s serves goes
// back to the asker. A withdrawn ask gets none: its asker waits no more.
func (s *served) Reply(body []byte, err error) { s.r.replyServed(s.sk, s, s.sk.id, body, err) }

// replyServed answers s, served for sk, under the asker's id, unless it
// was withdrawn. Until the answer is queued for the asker, answering
// counts it: Retire waits for it, so that the answer goes before the
// retirement on its lane.
func (r *Router) replyServed(sk servedKey, s *served, id uint64, body []byte, err error) {
	var u unsent
	if !r.finishServed(sk, s, err == nil && len(body) > largeEnvelope, &u) {
		return
	}
	r.answerAs(sk.from, id, body, err, u)
	r.mu.Lock()
	r.answering--
	r.idleLocked()
	r.mu.Unlock()
}

// finishServed forgets s, served for sk, once its outcome is known. It
// reports false when the ask was withdrawn. With alone set (the reply
// will go alone), it sets u for the reply to be withdrawn by the asker's
// cancel from now on.
func (r *Router) finishServed(sk servedKey, s *served, alone bool, u *unsent) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving[sk] == s {
		delete(r.serving, sk)
	}
	s.done = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.cancelled {
		r.idleLocked()
		return false
	}
	r.answering++
	if alone && !r.closed {
		ro := &replyOut{}
		ctx, unsend := context.WithCancel(context.Background())
		u.ctx, ro.unsend = ctx, unsend
		r.replying[sk] = ro
		u.done = func(err error) {
			r.mu.Lock()
			if r.replying[sk] == ro {
				delete(r.replying, sk)
			}
			if err != nil && ctx.Err() == nil {
				// Lost, not withdrawn by its asker: see Retire.
				r.unanswered[sk.from] |= 1 << laneOf(sk.id)
			}
			r.idleLocked()
			r.mu.Unlock()
		}
	}
	return true
}

// cancelServed cancels a request being served for another node.
func (r *Router) cancelServed(sk servedKey) {
	r.mu.Lock()
	s := r.serving[sk]
	delete(r.serving, sk)
	var stop func()
	if s != nil {
		stop = s.stopLocked()
	}
	ro := r.replying[sk]
	delete(r.replying, sk)
	r.idleLocked()
	r.mu.Unlock()
	if ro != nil {
		ro.unsend() // the answer, on its way: what was not written stays here
		return
	}
	if stop != nil {
		stop()
		return
	}
	r.dropHeld(sk)
}

// answer sends the outcome of request id to from, or completes it here.
func (r *Router) answer(from ring.NodeID, id uint64, body []byte, err error) {
	r.answerAs(from, id, body, err, unsent{})
}

// answerAs is answer with u for a reply that goes alone.
func (r *Router) answerAs(from ring.NodeID, id uint64, body []byte, err error, u unsent) {
	e := &envelope{kind: kindReply, id: id, body: body}
	if err != nil {
		e.err = toWire(err)
	}
	if self := r.self(); from == self || (from.Addr != "" && from.Addr == self.Addr) {
		// Asked here (by this incarnation or, just before a rejoin, by
		// the previous one, whose ask reply drops): never over the wire.
		r.reply(from, e)
		if u.done != nil {
			u.done(nil)
		}
		return
	}
	if serr := r.outboxFor(from).enqueueBody(id, e, nil, nil, true, u); serr != nil {
		r.log.Debug("troupe: reply not sent", "to", from, "err", serr)
		// The asker may wait on it still: a retirement on its lane would
		// tell it that the ask never ran (see Retire).
		r.mu.Lock()
		r.unanswered[from] |= 1 << laneOf(id)
		r.mu.Unlock()
		if u.done != nil {
			u.done(nil) // marked already
		}
	}
}

// reply completes the ask id with the outcome e carries. A node that no
// longer owns the key gets one retry against the fresh view.
func (r *Router) reply(from ring.NodeID, e *envelope) {
	notOwner := e.err != nil && e.err.code == codeNotOwner
	var hint ring.NodeID
	if notOwner {
		hint, _ = parseNodeID(e.err.hint)
	}
	r.mu.Lock()
	p := r.pending[e.id]
	if p == nil || p.to != from {
		// Withdrawn or failed meanwhile, or the late answer of a member
		// the ask has since been sent away from.
		r.mu.Unlock()
		return
	}
	if notOwner && p.retries < maxRetries {
		p.retries++
		p.prev, p.hint = from, hint
		changed, backoff := r.unplaceLocked(p)
		r.mu.Unlock()
		r.retryLater(e.id, p, changed, backoff)
		return
	}
	delete(r.pending, e.id)
	r.mu.Unlock()
	if e.err == nil {
		p.done.Reply(e.body, nil)
		return
	}
	err := fromWire(e.err, from.String())
	if notOwner {
		err = fmt.Errorf("%w: %s/%s: %d members in turn said another owns the key: %w", fault.ErrUnavailable, p.out.Type, p.out.Key, maxRetries+1, err)
	}
	p.done.Reply(nil, err)
}

// unplaceLocked takes the pending ask p back from where it was placed, to
// be placed again: it stays in r.pending, at no member, so that a
// withdraw meanwhile finds it (see redispatch). It returns what
// retryLater waits on. r.mu is held, and p.retries counts this retry.
func (r *Router) unplaceLocked(p *pending) (changed <-chan struct{}, backoff time.Duration) {
	if p.unsend != nil {
		// A request still being written where it no longer goes: the
		// rest stays here (the retry sends it whole).
		p.unsend()
		p.unsend = nil
	}
	p.to = ring.NodeID{}
	return r.changed, retryBackoff << (p.retries - 1)
}

// retryLater sends the ask p again once this node's view changed (the
// member that said no saw a change first), or after a short wait, when
// the hint decides; unplaceLocked took it back. It stays withdrawable
// meanwhile.
func (r *Router) retryLater(id uint64, p *pending, changed <-chan struct{}, backoff time.Duration) {
	wait := retryWait
	if dl := p.out.Deadline; !dl.IsZero() {
		wait = min(wait, time.Until(dl)/2)
	}
	backoff = min(backoff, wait)
	go func() {
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-r.ctx.Done():
		}
		t.Reset(wait - backoff)
		select {
		case <-changed:
		case <-t.C:
		case <-r.ctx.Done():
		}
		t.Stop()
		if err := r.redispatch(id, p); err != nil {
			p.done.Reply(nil, err)
		}
	}()
}

// parseNodeID parses addr#incarnation, as NodeID.String prints it.
func parseNodeID(s string) (ring.NodeID, bool) {
	i := strings.LastIndexByte(s, '#')
	if i < 0 {
		return ring.NodeID{}, false
	}
	inc, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return ring.NodeID{}, false
	}
	return ring.NodeID{Addr: s[:i], Incarnation: inc}, true
}
