package remote

import (
	"maps"
	"math"
	"runtime"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// Forgetting peers that are gone.
//
// A router keeps state per peer: an inbox (stage two of receiving), an
// outbox (batches to send), and on a member a client's subscription to
// member-list pushes and the lanes on which a reply to it was lost
// (unanswered). A client process is never in the view, and each restart
// of one is a new NodeID, so on a member with web processes that come and
// go this state would grow for ever: nothing tells the member that a
// client is gone for good.
//
// So a pruner, once per pruneEvery, forgets every peer that is not in the
// view, has been silent for clientExpiry (no batch of any kind from it:
// clients sync every few seconds with the members they follow, and ask
// and tell whichever member owns a key) and has no ask served or answered
// here: its subscription, inbox, outbox and unanswered lanes go. Silence
// is not death (a client waiting on a long ask here sends nothing more
// here), so the asks served for a silent peer are not stopped, and the
// peer is kept until they end: answered, withdrawn, or at their deadline.
// Peers in the view are never forgotten; one the view no longer lists (an
// older incarnation of a member) is forgotten like a client.
//
// A peer forgotten that comes back finds nothing missing: its next batch
// makes an inbox, its next sync subscribes it again, the next reply to it
// makes an outbox. What goes are caches (the strings last decoded, the
// keys last found free of hand-off holds, when a notice last went to the
// client) and nothing order relies on: an inbox or an outbox is forgotten
// only while it holds no work, so nothing overtakes what the peer or this
// node sent before. A subscription still lapses on its own clientExpiry
// after the client's last sync, as before: a client that asks this member
// but follows others gets no pushes from it.

// pruneEvery is how often the pruner looks for peers to forget: a peer is
// forgotten between clientExpiry and clientExpiry+pruneEvery after it was
// last heard.
const pruneEvery = clientExpiry / 4

// peerUse is what the pruner found of one peer.
type peerUse struct {
	member bool // in the view (or this node itself)
	// asking: an ask of the peer is served here, or its answer is on
	// its way alone.
	asking bool
	// silent is how long at least nothing has come from the peer.
	silent time.Duration
}

// forgettable reports whether the router may forget what it holds for a
// peer, the rule of the pruner.
func (u peerUse) forgettable(expiry time.Duration) bool {
	return !u.member && !u.asking && u.silent >= expiry
}

// silence returns how long at least a peer has been silent at now (the
// pruner's clock), from its inbox's marks: b nil means the peer has no
// inbox, hence nothing came from it since before an earlier pass forgot
// it (or ever).
func silence(b *inbox, now time.Duration) time.Duration {
	if b == nil {
		return math.MaxInt64
	}
	if b.heard.Load() {
		return 0
	}
	return now - time.Duration(b.heardAt.Load())
}

// prune forgets the peers the rule allows, until the router closes.
func (r *Router) prune() {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			r.pruneAt(time.Since(r.started), time.Now(), clientExpiry)
		}
	}
}

// pruneAt is one pass of the pruner at now (since the router started;
// wall is the same instant, for subscriptions): it forgets the peers
// silent for expiry. It returns how many it forgot.
func (r *Router) pruneAt(now time.Duration, wall time.Time, expiry time.Duration) int {
	// Note who was heard since the last pass: a peer's silence counts
	// from the pass that last found its inbox marked, which is no
	// earlier than its last batch.
	peers := map[ring.NodeID]struct{}{}
	r.inboxes.Range(func(k, v any) bool {
		b := v.(*inbox)
		if b.heard.Swap(false) {
			b.heardAt.Store(int64(now))
		}
		peers[k.(ring.NodeID)] = struct{}{}
		return true
	})
	if ob := r.outboxes.Load(); ob != nil {
		for id := range *ob {
			peers[id] = struct{}{}
		}
	}
	r.mu.Lock()
	for c, sub := range r.clients {
		if sub.expired(wall) {
			delete(r.clients, c)
		}
		peers[c] = struct{}{}
	}
	for id := range r.unanswered {
		peers[id] = struct{}{}
	}
	r.mu.Unlock()

	v := r.view.Load()
	self := r.self()
	var gone []ring.NodeID
	for id := range peers {
		_, member := v.status[id]
		u := peerUse{member: member || id == self, silent: silence(r.inbox(id), now)}
		if u.forgettable(expiry) { // asking is looked at below, under r.mu
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return 0
	}

	// Under r.mu, nothing subscribes a client or serves its ask (a
	// sync, an ask from it, a reply to it): the rule is applied again
	// there, with the inbox as it is now.
	r.mu.Lock()
	asking := r.askersLocked()
	v = r.view.Load()
	forgot := gone[:0]
	for _, id := range gone {
		b := r.inbox(id)
		_, member := v.status[id]
		u := peerUse{member: member, silent: silence(b, now), asking: asking[id]}
		if !u.forgettable(expiry) || (b != nil && !b.drop()) {
			continue
		}
		delete(r.clients, id)
		delete(r.unanswered, id)
		if b != nil {
			r.inboxes.CompareAndDelete(id, b)
		}
		forgot = append(forgot, id)
	}
	r.mu.Unlock()
	// An outbox with work stays for a later pass: the peer has no inbox
	// now, so it is still silent then, unless it came back.
	r.dropOutboxes(forgot)
	return len(forgot)
}

// inbox returns the inbox of id, or nil.
func (r *Router) inbox(id ring.NodeID) *inbox {
	b, _ := r.inboxes.Load(id)
	ib, _ := b.(*inbox)
	return ib
}

// askersLocked returns the peers whose asks are served here or whose
// answers are on their way alone. r.mu held.
func (r *Router) askersLocked() map[ring.NodeID]bool {
	m := map[ring.NodeID]bool{}
	for sk := range r.serving {
		m[sk.from] = true
	}
	for sk := range r.replying {
		m[sk.from] = true
	}
	return m
}

// drop marks b forgotten unless stage one is at work with it or its
// worker has segments: it reports whether it did. A stage one that
// starts after sees the mark and looks the inbox up again (enter); with
// both sides writing their own atomic first and reading the other's
// after, at least one of them sees the other.
func (b *inbox) drop() bool {
	if b.users.Load() != 0 || b.pending.Load() != 0 {
		return false
	}
	b.dropped.Store(true)
	if b.users.Load() != 0 || b.pending.Load() != 0 {
		b.dropped.Store(false)
		return false
	}
	return true
}

// enter returns the inbox of from for stage one, marked heard and
// counted in use until the caller calls b.users.Add(-1). An inbox the
// pruner is forgetting is looked up again, and made anew once gone.
func (r *Router) enter(from ring.NodeID) *inbox {
	for {
		b := r.inboxFor(from)
		b.users.Add(1)
		if !b.dropped.Load() {
			if !b.heard.Load() { // a store per pass, not per batch
				b.heard.Store(true)
			}
			return b
		}
		b.users.Add(-1)
		runtime.Gosched() // the pruner deletes it in a moment
	}
}

// dropOutboxes forgets the outboxes of ids that hold nothing to send.
func (r *Router) dropOutboxes(ids []ring.NodeID) {
	if len(ids) == 0 {
		return
	}
	r.outboxMu.Lock()
	defer r.outboxMu.Unlock()
	cur := r.outboxes.Load()
	if cur == nil {
		return
	}
	var next map[ring.NodeID]*outbox
	for _, id := range ids {
		o := (*cur)[id]
		if o == nil || !o.drop() {
			continue
		}
		if next == nil {
			next = maps.Clone(*cur)
		}
		delete(next, id)
	}
	if next == nil {
		return
	}
	r.outboxes.Store(&next)
	if o := r.lastOut.Load(); o != nil && o.dropped.Load() {
		r.lastOut.CompareAndSwap(o, nil)
	}
}

// drop marks o forgotten unless a lane holds a batch, an envelope being
// encoded to go alone, or envelopes gone alone that the peer has not
// taken yet: it reports whether it did. The mark is set with every lane
// locked, so a sender that finds it under its lane's lock sends through
// the peer's next outbox instead (enqueueBody). r.outboxMu held.
func (o *outbox) drop() bool {
	for i := range o.lanes {
		o.lanes[i].mu.Lock()
	}
	idle := true
	for i := range o.lanes {
		l := &o.lanes[i]
		if len(l.buf) > 0 || l.alone > 0 || len(l.diverted) > 0 {
			idle = false
			break
		}
	}
	if idle {
		o.dropped.Store(true)
	}
	for i := range o.lanes {
		o.lanes[i].mu.Unlock()
	}
	return idle
}

// expired reports whether a subscription lapsed at now: the client has
// not synced for clientExpiry.
func (s subscriber) expired(now time.Time) bool { return now.Sub(s.at) > clientExpiry }
