package membership

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

// WireTransport carries membership over a transport.Endpoint (a *transport.Transport
// in production, a *transport.MemEndpoint in tests): each Message is one
// msgpack envelope on the membership stream. It implements Transport,
// Inbound, Flusher and SelfReporter.
//
// Messages are addressed by advertised address alone (incarnation 0), so
// a seed whose incarnation is not yet known can be reached, and a process
// that restarted at an address receives what is sent there; the Core
// drops messages meant for another lifetime of itself (Message.To).
//
// Membership messages are only worth sending while fresh, so each one is
// sent under a context that ends after MessageTTL: wire drops what it has
// not written by then, which also bounds what queues for an unreachable
// address.
type WireTransport struct {
	ep  transport.Endpoint
	log *slog.Logger
	ttl time.Duration

	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	mu          sync.Mutex
	deliver     func(ctx context.Context, m Message) error
	unreachable func(id ring.NodeID, at time.Time)
	expiry      []expiring // newest last
	pending     []*transport.Receipt
	pruneAt     int
}

// expiring is a context shared by the sends of a short period; it ends
// at its deadline or at Close.
type expiring struct {
	ctx      context.Context
	cancel   context.CancelFunc
	created  time.Time
	deadline time.Time
}

// WireOptions configures a WireTransport. The zero value means the
// defaults.
type WireOptions struct {
	// MessageTTL is how long a membership message may wait in the wire
	// queue before it is dropped unsent. Default 2 s.
	MessageTTL time.Duration
	// Logger receives dropped and undecodable messages at Debug. Default
	// nil: discard.
	Logger *slog.Logger
}

// NewWireTransport returns a Transport over ep and registers its handler
// for transport.StreamMembership: call it before ep carries traffic (for a
// *transport.Transport, before Serve). Messages that arrive before a Node is
// attached are dropped; the Core retransmits.
func NewWireTransport(ep transport.Endpoint, opts WireOptions) *WireTransport {
	if opts.MessageTTL <= 0 {
		opts.MessageTTL = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &WireTransport{ep: ep, log: opts.Logger, ttl: opts.MessageTTL, ctx: ctx, cancel: cancel}
	ep.Handle(transport.StreamMembership, transport.HandlerFunc(t.receive))
	ep.OnPeerEvent(t.peerEvent)
	return t
}

var (
	_ Transport    = (*WireTransport)(nil)
	_ Inbound      = (*WireTransport)(nil)
	_ Flusher      = (*WireTransport)(nil)
	_ SelfReporter = (*WireTransport)(nil)
	_ DialReporter = (*WireTransport)(nil)

	_ UnreachableReporter = (*WireTransport)(nil)
)

// Self returns the identity the wire endpoint speaks for.
func (t *WireTransport) Self() ring.NodeID { return t.ep.Self() }

// SetReceiver sets where received messages go; Start calls it.
func (t *WireTransport) SetReceiver(deliver func(ctx context.Context, m Message) error) {
	t.mu.Lock()
	t.deliver = deliver
	t.mu.Unlock()
}

// SetUnreachable sets who hears of peers that a dial failed to reach
// after their connection broke; Start calls it.
func (t *WireTransport) SetUnreachable(f func(id ring.NodeID, at time.Time)) {
	t.mu.Lock()
	t.unreachable = f
	t.mu.Unlock()
}

// peerEvent passes on the transport's suspicions: a connection broke
// and the redial failed, which membership counts as an accusation.
func (t *WireTransport) peerEvent(e transport.PeerEvent) {
	if !e.Suspect || e.Peer.IsZero() || t.ctx.Err() != nil {
		return
	}
	t.mu.Lock()
	f := t.unreachable
	t.mu.Unlock()
	if f != nil {
		f(e.Peer, time.Now())
	}
}

// receive decodes one envelope and hands it to the node. A message whose
// claimed sender is not the identity wire authenticated at the handshake
// is dropped.
func (t *WireTransport) receive(from ring.NodeID, payload []byte) {
	if t.ctx.Err() != nil {
		return
	}
	m, err := DecodeMessage(payload)
	if err != nil {
		t.log.Debug("membership: dropped undecodable message", "from", from, "err", err)
		return
	}
	if from != m.From {
		t.log.Debug("membership: dropped message whose sender disagrees with the connection", "from", from, "claims", m.From)
		return
	}
	t.mu.Lock()
	deliver := t.deliver
	t.mu.Unlock()
	if deliver == nil {
		return
	}
	if err := deliver(t.ctx, m); err != nil {
		t.log.Debug("membership: message not delivered", "from", from, "err", err)
	}
}

// Send encodes msg and queues it on the membership stream to the peer
// that advertises addr. It does not wait for the peer. ctx is checked
// once; the message's lifetime in the queue is MessageTTL.
func (t *WireTransport) Send(ctx context.Context, addr string, msg Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := EncodeMessage(msg)
	if err != nil {
		return err
	}
	r, err := t.ep.Send(t.sendContext(), ring.NodeID{Addr: addr}, transport.StreamMembership, 0, b)
	if err != nil {
		return err
	}
	t.track(r)
	return nil
}

// sendContext returns the shared context of the current period. Sharing
// one context among the sends of a quarter TTL keeps the cost of
// deadlines to a few timers a second.
func (t *WireTransport) sendContext() context.Context {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.expiry); n > 0 && now.Sub(t.expiry[n-1].created) < t.ttl/4 {
		return t.expiry[n-1].ctx
	}
	// Release the timers of periods that have expired.
	kept := t.expiry[:0]
	for _, e := range t.expiry {
		if now.After(e.deadline) {
			e.cancel()
		} else {
			kept = append(kept, e)
		}
	}
	t.expiry = kept
	ctx, cancel := context.WithDeadline(t.ctx, now.Add(t.ttl))
	t.expiry = append(t.expiry, expiring{ctx: ctx, cancel: cancel, created: now, deadline: now.Add(t.ttl)})
	return ctx
}

// track remembers a receipt for Flush, forgetting resolved ones now and
// then so the list stays as long as what is in flight.
func (t *WireTransport) track(r *transport.Receipt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, r)
	if len(t.pending) < max(64, 2*t.pruneAt) {
		return
	}
	kept := t.pending[:0]
	for _, p := range t.pending {
		select {
		case <-p.Done():
		default:
			kept = append(kept, p)
		}
	}
	clear(t.pending[len(kept):])
	t.pending = kept
	t.pruneAt = len(kept)
}

// Flush waits until every message sent so far has been taken by its peer
// or has failed (expired, peer dead or restarted), for at most MessageTTL:
// a message written to a peer that has silently died would otherwise hold
// it until wire gives the peer up. It returns ctx's error if ctx ends
// first.
func (t *WireTransport) Flush(ctx context.Context) error {
	t.mu.Lock()
	pending := append([]*transport.Receipt(nil), t.pending...)
	t.mu.Unlock()
	limit := time.NewTimer(t.ttl)
	defer limit.Stop()
	for _, r := range pending {
		select {
		case <-r.Done():
		case <-limit.C:
			t.log.Debug("membership: flush gave up on messages not yet taken", "after", t.ttl)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// LastHeard returns when bytes of any stream last arrived from the peer
// at addr.
func (t *WireTransport) LastHeard(addr string) time.Time {
	at, _ := t.ep.LastHeard(ring.NodeID{Addr: addr})
	return at
}

// PeerDead tells wire to fail what waits for the process and drop its
// session.
func (t *WireTransport) PeerDead(id ring.NodeID) { t.ep.PeerDead(id) }

// Close stops delivering to the node and drops every message not yet
// written. It does not close the wire endpoint, which other layers share.
func (t *WireTransport) Close() error {
	t.cancel()
	t.mu.Lock()
	for _, e := range t.expiry {
		e.cancel()
	}
	t.expiry = nil
	t.pending = nil
	t.mu.Unlock()
	return nil
}

// DialError returns the last dial error to addr, if the endpoint keeps
// one (a *transport.Transport does; see Transport.DialError).
func (t *WireTransport) DialError(addr string) error {
	if d, ok := t.ep.(DialReporter); ok {
		return d.DialError(addr)
	}
	return nil
}
