package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// Handler receives the envelopes of one stream. Receive is called for one
// peer and stream at a time, in the order the peer sent the envelopes of
// each key; it owns payload, and may give its buffer back with
// Transport.Release once done with it. Credit for the envelope returns to
// the peer when Receive returns, so a slow handler slows that peer's
// stream (and only that stream).
type Handler interface {
	Receive(from ring.NodeID, payload []byte)
}

// A DeferHandler is a Handler that may leave part of an envelope's work
// until the envelope is released. When the transport's reader delivers an
// envelope itself (the stream's handler idle), it calls ReceiveDefer
// instead of Receive, then returns the envelope's credit and lets the
// stream deliver its next envelope, and then calls the function returned
// (if not nil) on the same goroutine. That work may thus overlap the
// handling of later envelopes of the stream; should it block, another
// goroutine goes on reading the connection, at once if the work calls
// relieve (it is about to wait, say for a reply that may come on this
// connection), else within a millisecond or two. Elsewhere (the stream's
// deliverer, MemEndpoint) Receive is called as for any Handler.
type DeferHandler interface {
	Handler
	ReceiveDefer(from ring.NodeID, payload []byte) (then func(relieve func()))
}

// A QuickHandler is a DeferHandler that can tell an envelope whose
// handling never waits (say replies that complete requests). The reader
// delivers such an envelope without its relief watch: while deliveries
// go on, the watch's timer fires every millisecond, each time a wake-up
// of an idle thread, which costs more than the delivery itself.
type QuickHandler interface {
	DeferHandler
	Quick(payload []byte) bool
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(from ring.NodeID, payload []byte)

// Receive calls f.
func (f HandlerFunc) Receive(from ring.NodeID, payload []byte) { f(from, payload) }

// PeerEvent reports a peer becoming reachable (Up), unreachable for now
// (Suspect: its connection broke and a redial could not connect; the
// session still waits to resume), or lost (neither). Err says why a peer was suspected
// or lost: the dial error, ErrPeerRestarted, ErrPeerDead, or nil for an
// orderly goodbye.
type PeerEvent struct {
	Peer    ring.NodeID
	Up      bool
	Suspect bool
	Err     error
}

// Transport is one node's end of the wire protocol: it accepts and dials
// connections, keeps a session per peer across connections, and moves
// envelopes on streams. Its methods are safe for concurrent use.
type Transport struct {
	cfg      wire.Config
	loc      *local
	log      *slog.Logger
	handlers [NumStreams]atomic.Pointer[Handler]
	bufs     *bufPool // released envelope buffers
	// draining is set by Shutdown: new sends fail with ErrClosed.
	draining atomic.Bool

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*session
	// last is the session sessionFor found last: a node mostly talks to
	// one peer at a time (an ask and its reply), and the check spares the
	// lock and the map's string hash. Cleared when that session is removed
	// and at Close; it never holds a client's session (no address).
	last atomic.Pointer[session]
	// lastClient is last for clients, matched by identity: a node's
	// replies to a client would otherwise build the client's session key
	// (a string with its incarnation) for each send.
	lastClient atomic.Pointer[session]
	lns        map[net.Listener]struct{}
	closed     bool
	rng        *rand.Rand
	listeners  []func(PeerEvent)
	events     []PeerEvent
	emitting   bool
	notes      dialNotes // under mu

	tune tuning // set by New; tests change it before the first connection
	// posted are the receipts of envelopes sent with Post, which nobody
	// outside the session sees: once credited they serve again.
	posted sync.Pool

	// holding counts the open holds (see Hold), read without holds.mu by
	// every send; holds has them with the sessions waiting for a release.
	holding atomic.Int32
	holds   holds

	// resumes counts the sessions that resumed on a new connection;
	// departed holds the traffic of the sessions removed, removals
	// counts them (both under mu; see Stats).
	resumes  atomic.Uint64
	departed traffic
	removals uint64
}

// New returns a transport for cfg. Handlers must be set with Handle before
// the first connection.
func New(cfg wire.Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = withDefaults(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:  cfg,
		tune: defaultTuning(),
		loc: &local{
			cluster: cfg.ClusterName,
			node:    ring.NodeID{Addr: cfg.Advertise, Incarnation: cfg.Incarnation},
			limits:  cfg.Limits,
			codecs:  codecOffers(cfg.Compression),
			tls:     cfg.TLS,
			timeout: cfg.HandshakeTimeout,
		},
		log:      cfg.Logger,
		ctx:      ctx,
		cancel:   cancel,
		sessions: map[string]*session{},
		lns:      map[net.Listener]struct{}{},
		rng:      rand.New(rand.NewPCG(cfg.Incarnation, 0x74726f757065)),
		bufs:     newBufPool(classSize(cfg.Limits.MaxMessage), poolBytes(cfg.Limits)),
	}
	return t, nil
}

// poolBytes bounds the released buffers a transport keeps for reuse: a
// few envelopes of the largest size, enough for a stream whose handler
// releases each payload soon after the next one arrives, and at most
// 32 MiB (larger envelopes are then simply not pooled).
func poolBytes(l wire.Limits) int { return min(4*l.MaxMessage, 32<<20) }

// Release gives the transport back the buffer of a payload that one of
// its handlers received, to read a later envelope into; a receiver of
// large envelopes that releases them saves zeroing fresh memory and
// collecting it (about a fifth of the receiving CPU for 1 MiB envelopes).
//
// Calling it is optional: a payload never released is collected like any
// other memory. Release a payload only once nothing uses it any more, its
// bytes nor any slice of them, and only once: the buffer will hold
// another envelope. Release keeps only buffers of the sizes the transport
// allocates for envelopes of 32 KiB and more, up to four of the largest
// envelopes and at most 32 MiB in all, and ignores anything else.
func (t *Transport) Release(payload []byte) { t.bufs.put(payload) }

// Buffer returns an empty buffer with room for n bytes, for a payload to
// Post: one that Post or Release gave back when there is one of its size
// class (32 KiB and more), else a new one.
func (t *Transport) Buffer(n int) []byte {
	if t.bufs.pooled(n) {
		return t.bufs.get(n)
	}
	return make([]byte, 0, n)
}

// Self returns this node's identity.
func (t *Transport) Self() ring.NodeID { return t.loc.node }

// Handle sets the handler of a stream. Envelopes that arrive while a
// stream has no handler are taken and dropped; set handlers before traffic
// flows.
func (t *Transport) Handle(s StreamID, h Handler) {
	if s >= NumStreams {
		return
	}
	t.handlers[s].Store(&h)
}

// OnPeerEvent adds f to the functions told about peers coming up and
// going down. Every listener sees every event, in order; listeners are
// called one after the other, in the order they were added, from one
// goroutine at a time, and must not block. Add them before traffic flows:
// a listener added later misses earlier events. (OnPeerEvent used to
// replace the one listener; it now adds one, so that several layers can
// listen.)
func (t *Transport) OnPeerEvent(f func(PeerEvent)) {
	if f == nil {
		return
	}
	t.mu.Lock()
	t.listeners = append(t.listeners, f)
	t.mu.Unlock()
}

func (t *Transport) isClosed() bool {
	select {
	case <-t.ctx.Done():
		return true
	default:
		return false
	}
}

// emit queues an event and delivers the queue unless another goroutine is
// already delivering; events keep their order.
func (t *Transport) emit(e PeerEvent) {
	t.mu.Lock()
	if len(t.listeners) == 0 {
		t.mu.Unlock()
		return
	}
	t.events = append(t.events, e)
	if t.emitting {
		t.mu.Unlock()
		return
	}
	t.emitting = true
	t.mu.Unlock()
	// Delivered from a fresh goroutine so that callers holding a session
	// lock never run user code.
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			t.mu.Lock()
			if len(t.events) == 0 {
				t.emitting = false
				t.mu.Unlock()
				return
			}
			ev := t.events[0]
			t.events = t.events[1:]
			fs := t.listeners
			t.mu.Unlock()
			for _, f := range fs {
				f(ev)
			}
		}
	}()
}

// Serve accepts connections on ln until Close, then returns ErrClosed.
// The listener is closed when Serve returns.
func (t *Transport) Serve(ln net.Listener) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ln.Close()
		return wire.ErrClosed
	}
	t.lns[ln] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()
	defer ln.Close()
	for {
		c, err := ln.Accept()
		if err != nil {
			if t.isClosed() {
				return wire.ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.accept(c)
		}()
	}
}

// sessionFor returns the session of a peer, creating it if create is set.
func (t *Transport) sessionFor(id ring.NodeID, create bool) (*session, error) {
	key := id.Addr
	if key == "" {
		if s := t.lastClient.Load(); s != nil && s.client == id {
			return s, nil
		}
		key = "client/" + id.String()
	} else if s := t.last.Load(); s != nil && s.key == key {
		return s, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, wire.ErrClosed
	}
	if s := t.sessions[key]; s != nil || !create {
		switch {
		case s == nil:
		case id.Addr != "":
			t.last.Store(s)
		default:
			t.lastClient.Store(s)
		}
		return s, nil
	}
	s, err := newSession(t, key, id.Addr)
	if err != nil {
		return nil, err
	}
	if id.Addr == "" {
		s.client = id
	}
	t.sessions[key] = s
	for st := range StreamID(NumStreams) {
		t.wg.Add(1)
		go s.deliver(st)
	}
	return s, nil
}

// removeLocked takes a session out of the transport: the next contact with
// its peer makes a new one. Its deliverers end. The caller holds s.mu.
func (s *session) removeLocked() {
	t := s.t
	t.mu.Lock()
	if t.sessions[s.key] == s {
		delete(t.sessions, s.key)
		t.departed.add(&s.traffic)
		t.removals++
		s.folded, s.foldSeq = s.traffic, t.removals
	}
	t.last.CompareAndSwap(s, nil)
	t.lastClient.CompareAndSwap(s, nil)
	t.mu.Unlock()
	s.removed = true
	s.wakeDeliverersLocked()
}

// Send queues payload for the peer on stream, behind earlier envelopes
// with the same key, and returns without waiting for delivery. The
// Receipt tells when the peer's layer above took it, or why it never
// will. payload must not be modified afterwards.
//
// ctx governs the envelope until its last byte is written: if it ends
// first, what was not yet written is dropped (the peer discards a
// partial envelope) and the receipt resolves with ctx's error.
//
// to.Addr names the peer (empty for a client that dialed us, with its
// full identity). A non-zero to.Incarnation older than the session's
// fails at once with ErrPeerRestarted. A newer one means the peer
// restarted and we learned it before the transport did: what was pending
// towards the previous incarnation fails with ErrPeerRestarted, and the
// session starts afresh towards the new one with this envelope.
//
// Send never blocks: beyond Config.SendQueue it fails with ErrQueueFull
// (SendWait waits for room instead). While the session has no connection
// and waits out a redial backoff, a Send redials at once (at most once per
// 10 ms). After Shutdown or Close it fails with ErrClosed.
func (t *Transport) Send(ctx context.Context, to ring.NodeID, stream StreamID, key uint64, payload []byte) (*Receipt, error) {
	return t.send(ctx, to, stream, key, payload, false, false, order{})
}

// SendAfter is Send for an envelope that also starts only once the
// envelopes queued so far for the peer on stream under key after are
// fully written (or dropped); envelopes queued under after later do not
// wait for it. A sender whose envelopes share a key moves a large one off
// it this way: what it queues under that key next goes ahead of the large
// one's frames, and the large one still arrives after what was queued
// before it.
func (t *Transport) SendAfter(ctx context.Context, to ring.NodeID, stream StreamID, key, after uint64, payload []byte) (*Receipt, error) {
	return t.send(ctx, to, stream, key, payload, false, false, order{follow: true, after: after})
}

// order is how an envelope queues besides its key: with follow set, also
// behind what is queued under after (SendAfter).
type order struct {
	follow bool
	after  uint64
}

// SendWait is Send, except that when the peer's send queue is full it
// waits for room until ctx ends (and then returns ctx's error) instead of
// failing with ErrQueueFull.
func (t *Transport) SendWait(ctx context.Context, to ring.NodeID, stream StreamID, key uint64, payload []byte) (*Receipt, error) {
	return t.send(ctx, to, stream, key, payload, true, false, order{})
}

// Post is Send for a sender that never looks at the envelope's fate (the
// router's batches): it returns no receipt, so the transport reuses the
// bookkeeping of the envelope once its credit came back instead of
// allocating it afresh for every envelope. Post takes the payload: the
// caller must not touch it again, and once the peer consumed it the
// transport reuses its buffer (see Buffer).
func (t *Transport) Post(to ring.NodeID, stream StreamID, key uint64, payload []byte) error {
	_, err := t.send(context.Background(), to, stream, key, payload, false, true, order{})
	return err
}

func (t *Transport) send(ctx context.Context, to ring.NodeID, stream StreamID, key uint64, payload []byte, wait, post bool, o order) (*Receipt, error) {
	if stream >= NumStreams {
		return nil, fmt.Errorf("%w: %d", ErrUnknownStream, stream)
	}
	if len(payload) > t.cfg.Limits.MaxMessage {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", wire.ErrMessageTooLarge, len(payload), t.cfg.Limits.MaxMessage)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if to.Addr == t.loc.node.Addr && to.Addr != "" {
		return nil, fmt.Errorf("troupe: send to self %v", to)
	}
	for {
		s, err := t.sessionFor(to, to.Addr != "")
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, fmt.Errorf("%w: unknown client %v", wire.ErrPeerDead, to)
		}
		s.mu.Lock()
		if s.removed {
			// Given up on a moment ago: the next session starts afresh.
			s.mu.Unlock()
			continue
		}
		if t.draining.Load() {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: shutting down", wire.ErrClosed)
		}
		if to.Incarnation != 0 && !s.id.IsZero() && s.id.Incarnation != to.Incarnation {
			if to.Incarnation < s.id.Incarnation {
				cur := s.id
				s.mu.Unlock()
				return nil, fmt.Errorf("%w: %v is now %v", wire.ErrPeerRestarted, to, cur)
			}
			s.restartLocked(to)
		}
		if wait && s.fullLocked(len(payload)) {
			room := s.roomLocked()
			s.mu.Unlock()
			select {
			case <-room:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-t.ctx.Done():
				return nil, wire.ErrClosed
			}
		}
		var r *Receipt
		if post {
			r = t.getPosted()
			r.payload = payload
		} else {
			r = newReceipt()
		}
		if ctx.Done() != nil {
			// Set before the receipt is shared; the watch runs on its own
			// goroutine, so creating it under the lock is safe.
			r.stop = context.AfterFunc(ctx, func() {
				s.mu.Lock()
				s.cancelLocked(r, ctx.Err())
				s.mu.Unlock()
			})
		}
		if _, err := s.enqueueLocked(stream, key, payload, r, o); err != nil {
			s.mu.Unlock()
			r.resolve(err)
			return nil, err
		}
		if cerr := ctx.Err(); cerr != nil {
			s.cancelLocked(r, cerr)
		}
		switch c := s.conn; {
		case c == nil:
			if s.id.IsZero() && s.wantSince.IsZero() {
				s.wantSince = time.Now()
			}
			s.ensureDialLocked()
			s.nudgeDialLocked()
		case s.creditHeldLocked(stream, len(payload)):
			// The grant that frees it wakes the writer.
		case c.raw != nil && !c.writing && len(payload) <= inlineMax:
			if !t.deferWriteLocked(s) {
				c.writeInlineLocked(inlineBudget)
			}
		case !t.deferWriteLocked(s):
			s.kick()
		}
		s.mu.Unlock()
		if post {
			return nil, nil // r is the session's now: it may be reused
		}
		return r, nil
	}
}

// restartLocked starts the session afresh towards a newer incarnation of
// its peer, which a caller learned of before the transport did: what was
// pending towards the old one fails with ErrPeerRestarted, and its
// connection, if any, is dropped.
func (s *session) restartLocked(to ring.NodeID) {
	err := fmt.Errorf("%w: %v is now %v", wire.ErrPeerRestarted, s.id, to)
	old := s.id
	s.failAllLocked(err)
	if s.conn != nil {
		s.gen++
		s.conn.Close()
		s.conn = nil
		s.downAt = time.Now()
	}
	if s.up {
		s.up = false
		s.t.emit(PeerEvent{Peer: old, Err: err})
	}
	s.suspected = false
	s.id = ring.NodeID{}
}

// nudgeDialLocked cuts short the backoff of a dial loop that waits to
// redial: there is something to send now.
func (s *session) nudgeDialLocked() {
	select {
	case s.redial <- struct{}{}:
	default:
	}
}

// PeerDead is the hook for the membership layer: the peer is declared dead,
// so whatever waits for it fails now with ErrPeerDead instead of waiting
// out the resume grace, and its session is dropped.
func (t *Transport) PeerDead(id ring.NodeID) {
	s, _ := t.sessionFor(id, false)
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.id != id && !(s.id.IsZero() && id.Incarnation == 0) {
		s.mu.Unlock()
		return
	}
	s.dropLocked(fmt.Errorf("%w: declared dead", wire.ErrPeerDead))
	s.mu.Unlock()
}

// LastHeard returns when any byte last arrived from the peer at addr (or
// the client id), for the failure detector. It never goes backwards for a
// session, across reconnects and resumes included.
func (t *Transport) LastHeard(id ring.NodeID) (time.Time, bool) {
	s, _ := t.sessionFor(id, false)
	if s == nil {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteHeardLocked(s.conn)
	return s.lastHeard, !s.lastHeard.IsZero()
}

// noteHeardLocked raises the session's last-heard time to what connection
// c (if any) heard; it never lowers it.
func (s *session) noteHeardLocked(c *liveConn) {
	if c == nil {
		return
	}
	if h := c.heard(); h.After(s.lastHeard) {
		s.lastHeard = h
	}
}

// Shutdown leaves gracefully: new sends fail with ErrClosed at once, and
// Shutdown waits until every envelope already sent was taken by its peer
// (or failed), or ctx ends; then it closes as Close does, peers seeing an
// orderly goodbye. It returns ctx's error if ctx ended first, and closes
// anyway.
func (t *Transport) Shutdown(ctx context.Context) error {
	t.draining.Store(true)
	t.mu.Lock()
	sessions := make([]*session, 0, len(t.sessions))
	for _, s := range t.sessions {
		sessions = append(sessions, s)
	}
	t.mu.Unlock()
	// No send can start after draining is set (Send checks it under the
	// session lock), so the receipts gathered here are all that remain.
	var pending []*Receipt
	for _, s := range sessions {
		s.mu.Lock()
		pending = s.appendPendingLocked(pending)
		s.mu.Unlock()
	}
	err := waitAll(ctx, pending)
	t.Close()
	return err
}

// Close says goodbye on every connection, fails pending sends with
// ErrClosed and waits for the transport's goroutines to end.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.last.Store(nil)
	t.lastClient.Store(nil)
	for ln := range t.lns {
		ln.Close()
	}
	sessions := make([]*session, 0, len(t.sessions))
	for _, s := range t.sessions {
		sessions = append(sessions, s)
	}
	t.mu.Unlock()

	// Every writer says goodbye; give them a moment together, then cut.
	var writers []chan struct{}
	for _, s := range sessions {
		s.mu.Lock()
		s.closing = true
		if s.grace != nil {
			s.grace.Stop()
		}
		if s.grantT != nil {
			s.grantT.Stop()
		}
		if c := s.conn; c != nil {
			writers = append(writers, c.done)
		}
		s.kick()
		s.mu.Unlock()
	}
	grace := time.NewTimer(time.Second)
	for _, done := range writers {
		select {
		case <-done:
		case <-grace.C:
		}
	}
	grace.Stop()
	t.cancel()
	for _, s := range sessions {
		s.mu.Lock()
		if s.conn != nil {
			s.conn.Close()
		}
		s.failAllLocked(wire.ErrClosed)
		s.wakeDeliverersLocked()
		s.mu.Unlock()
	}
	t.wg.Wait()
	return nil
}

// dropLocked ends the session: pending sends fail with err, the
// connection closes, and the next contact starts afresh.
func (s *session) dropLocked(err error) {
	s.failAllLocked(err)
	s.noteHeardLocked(s.conn)
	if s.conn != nil {
		s.gen++
		s.conn.Close()
		s.conn = nil
	}
	if s.dialCancel != nil {
		s.dialCancel()
	}
	if s.up {
		s.up = false
		s.t.emit(PeerEvent{Peer: s.id, Err: err})
	}
	s.id = ring.NodeID{}
	s.forgetClientLocked()
}

// forgetClientLocked removes a client's session once nothing can use it
// again: no connection, none on its way, no identity left to resume. A
// client is never dialed, and a client that connects again starts a
// session afresh, so kept it would only hold its deliverers and queue
// what is sent to it for ever; removed, sends to the client fail at once.
// Each restart of a client process is a new identity: without this a
// member would keep a session per client process it ever served. What
// was queued meanwhile (sent while a first connection was being accepted
// that then failed) fails as a send to an unknown client would. The
// caller holds s.mu.
func (s *session) forgetClientLocked() {
	if s.addr == "" && !s.removed && s.id.IsZero() && s.conn == nil && s.activating == nil && s.accepting == 0 {
		if s.queued.n > 0 {
			s.failAllLocked(fmt.Errorf("%w: client %v gone", wire.ErrPeerDead, s.client))
		}
		s.removeLocked()
	}
}

// ensureDialLocked starts the dial loop if the peer has an address and no
// loop runs.
func (s *session) ensureDialLocked() {
	if s.addr == "" || s.dialing || s.t.isClosed() || s.closing {
		return
	}
	s.dialing = true
	s.dialDone = make(chan struct{})
	ctx, cancel := context.WithCancel(s.t.ctx)
	s.dialCancel = cancel
	s.t.wg.Add(1)
	go s.dialLoop(ctx, cancel)
}

// wanted reports whether the session still needs a connection: it has
// data queued or unacknowledged, or a live session to resume.
func (s *session) wantedLocked() bool {
	if s.closing || s.conn != nil {
		return false
	}
	if !s.id.IsZero() {
		return true
	}
	return s.queued.n > 0
}

// dialLoop dials until the session has a connection, the peer is given
// up on, or the transport closes: at once, then with jittered backoff
// from RedialMin to RedialMax.
func (s *session) dialLoop(ctx context.Context, cancel context.CancelFunc) {
	t := s.t
	defer t.wg.Done()
	defer func() {
		s.mu.Lock()
		s.dialing = false
		close(s.dialDone)
		cancel()
		// A loop cancelled for a connection that then failed (or whose
		// failure was handled while this loop was still ending, and so
		// could not start another) must not leave the session without
		// a dialer.
		if s.conn == nil && s.activating == nil && s.wantedLocked() && !t.isClosed() {
			s.ensureDialLocked()
		}
		s.mu.Unlock()
	}()
	backoff := t.cfg.RedialMin
	var lastErr error
	for {
		s.mu.Lock()
		if !s.wantedLocked() || ctx.Err() != nil {
			s.mu.Unlock()
			return
		}
		if !s.downAt.IsZero() && !s.id.IsZero() && time.Since(s.downAt) > resumeGrace(&t.cfg) {
			s.dropLocked(fmt.Errorf("%w: unreachable for %v", wire.ErrPeerDead, resumeGrace(&t.cfg)))
			s.mu.Unlock()
			return
		}
		if s.neverReachedLocked() && s.activating == nil && s.accepting == 0 {
			// No connection to this address ever came up: give up on it
			// as on a peer unreachable past the grace, and forget it.
			s.removeLocked()
			s.dropLocked(fmt.Errorf("%w: %w: no connection to %s in %v: %v", wire.ErrPeerDead, wire.ErrNeverConnected, s.addr, resumeGrace(&t.cfg), lastErr))
			s.wantSince = time.Time{}
			s.mu.Unlock()
			return
		}
		known := s.id.Incarnation
		s.mu.Unlock()

		// Sends that arrived before this attempt are served by it.
		select {
		case <-s.redial:
		default:
		}
		attempt := time.Now()
		err := s.dialOnce(ctx, known)
		lastErr = err
		if errors.Is(err, errSuperseded) {
			t.noteDial(s.addr, nil) // a connection came up the other way
		} else {
			t.noteDial(s.addr, err)
		}
		if err == nil {
			return
		}
		// A superseded dial loops too: the loop ends at the top once the
		// connection that won is active, and dials again if it failed.
		var refused *wire.Refused
		if errors.As(err, &refused) && refused.Reason != wire.RefusedTimeout {
			// A refusal is a configuration mismatch; retrying will not
			// cure it. What waits for this peer fails with the reason
			// (noteDial logged it, or counted it for a summary).
			s.mu.Lock()
			s.dropLocked(err)
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		var ce *connectError
		if errors.As(err, &ce) && ctx.Err() == nil && s.up && s.conn == nil && !s.suspected {
			// The membership layer hears of it at once, rather than
			// after the resume grace. Only a dial that could not connect
			// says so: a handshake that failed after connecting (a
			// simultaneous dial settled the other way, a reset, a slow
			// peer) says nothing about the peer being gone.
			s.suspected = true
			t.emit(PeerEvent{Peer: s.id, Suspect: true, Err: err})
		}
		s.mu.Unlock()
		t.mu.Lock()
		wait := backoff/2 + time.Duration(t.rng.Int64N(int64(backoff/2)+1))
		t.mu.Unlock()
		backoff = min(2*backoff, t.cfg.RedialMax)
		s.mu.Lock()
		if d := s.giveUpAtLocked(); !d.IsZero() {
			// Wake up in time to give up when the grace ends.
			wait = min(wait, max(time.Until(d), 0)+time.Millisecond)
		}
		s.mu.Unlock()
		if !s.backoff(ctx, wait, attempt) {
			return
		}
	}
}

// redialGap is the least time between the start of a failed dial and a
// redial that a Send asks for: sends to an unreachable peer cannot make
// the loop dial without pause.
const redialGap = 10 * time.Millisecond

// backoff waits before the next dial: wait, or less if a Send asks for a
// redial (not before redialGap after the last attempt started). It
// reports false when ctx ended.
func (s *session) backoff(ctx context.Context, wait time.Duration, attempt time.Time) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case <-s.redial:
			if d := redialGap - time.Since(attempt); d > 0 && d < wait {
				timer.Reset(d)
				wait = d
				continue
			}
			return true
		}
	}
}

// giveUpAtLocked returns when the session gives up on a peer it cannot
// reach, or zero if it would not.
func (s *session) giveUpAtLocked() time.Time {
	grace := resumeGrace(&s.t.cfg)
	switch {
	case !s.downAt.IsZero() && !s.id.IsZero():
		return s.downAt.Add(grace)
	case s.id.IsZero() && !s.wantSince.IsZero():
		return s.wantSince.Add(grace)
	}
	return time.Time{}
}

// neverReachedLocked reports whether the session has waited the resume
// grace for a first connection to its peer.
func (s *session) neverReachedLocked() bool {
	return s.id.IsZero() && !s.wantSince.IsZero() && time.Since(s.wantSince) > resumeGrace(&s.t.cfg) && s.conn == nil
}

var errSuperseded = errors.New("troupe: connection superseded")

// connectError is a dial that could not open a connection (refused,
// unreachable, timed out connecting): the one redial failure that makes
// the peer suspect.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

func (s *session) dialOnce(ctx context.Context, known uint64) error {
	t := s.t
	hctx, cancel := context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	c, err := t.cfg.Dialer.DialContext(hctx, "tcp", dialAddress(&t.cfg, s.addr))
	if err != nil {
		return &connectError{err: err}
	}
	if err := setNotSentLowat(c, t.cfg.NotSentLowat); err != nil {
		t.log.Debug("troupe: wire: TCP_NOTSENT_LOWAT", "err", err)
	}
	hc, err := dialHandshake(hctx, c, t.loc, s.addr, known)
	if err != nil {
		return err
	}
	return s.resumeAsDialer(hctx, hc)
}

// accept runs the acceptor's side of a new connection.
func (t *Transport) accept(c net.Conn) {
	if err := setNotSentLowat(c, t.cfg.NotSentLowat); err != nil {
		t.log.Debug("troupe: wire: TCP_NOTSENT_LOWAT", "err", err)
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
	defer cancel()
	hc, err := acceptHandshake(ctx, c, t.loc, func(id ring.NodeID) uint64 {
		s, _ := t.sessionFor(id, false)
		if s == nil {
			return 0
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.id.Incarnation
	})
	if err != nil {
		t.log.Debug("troupe: wire: handshake refused", "remote", c.RemoteAddr(), "err", err)
		return
	}
	var s *session
	for {
		s, err = t.sessionFor(hc.peer.Node, true)
		if err != nil {
			hc.Close()
			return
		}
		s.mu.Lock()
		removed := s.removed
		if !removed {
			// A session being accepted on is not given up on.
			s.accepting++
		}
		s.mu.Unlock()
		if !removed {
			break
		}
	}
	defer func() {
		s.mu.Lock()
		s.accepting--
		s.forgetClientLocked() // a first resume that failed leaves nothing to keep
		s.mu.Unlock()
	}()
	if err := s.resumeAsAcceptor(ctx, hc); err != nil {
		t.log.Debug("troupe: wire: resume failed", "peer", hc.peer.Node, "err", err)
	}
}
