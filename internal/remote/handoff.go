package remote

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/ring"
)

// Hand-off of a key whose owner changed.
//
// When the member set changes, a key can move from its previous owner P
// to a new owner N while P still runs it: a handler in flight, messages
// queued in its mailbox (P ends the activation once they are handled; see
// host.Mover). So for the first message N receives for such a key within
// Config.Handoff of the change, N holds it, and every later one for the
// key (tells and asks, local or remote, in arrival order), and asks P to
// drain the key. P answers once its own view no longer places the key on
// itself and the key has no activation there. N then delivers what it
// held, in order, and the key activates on N: one activation at a time,
// and what a sender sent to P before the change is handled before what it
// sent to N after it. A key handed over is not checked again until the
// next change. N stops holding when P answers, when N's view says P is
// dead or gone, and at the latest after Config.Handoff (P unreachable).
//
// What is not covered: a message P forwards to N after the change can
// still arrive after one its sender sent N directly (a sender whose view
// changed first), and a key first used after the window is not checked.

// handoff is the view before the last change, consulted until its timer
// clears Router.handoff: a timer rather than a deadline, so that the
// messages checked meanwhile read no clock.
type handoff struct {
	prev  *view
	timer *time.Timer // nil for a window that never closes (tests)
	over  atomic.Bool // the timer fired
	// fresh, set while this node has just joined, is the view without
	// it: where prev places a key on this node, fresh names the member
	// that ran it before the join.
	fresh *view
}

// hold is a key held on this node until its previous owner drained it.
type hold struct {
	prev      ring.NodeID
	id        uint64 // the drain request
	items     []heldItem
	releasing bool
	timer     *time.Timer
}

// heldItem is a tell or ask held, with when it arrived (an ask's time to
// live shrinks by the wait).
type heldItem struct {
	from ring.NodeID
	e    envelope
	at   time.Time
	// wake, when set, is a runtime's call held in the message's place
	// (see route.HoldWake): release calls it instead of delivering e,
	// and Close with closed set.
	wake func(closed bool)
}

// holdKey names a held key: a struct, not a joined string, so that the
// look-up most messages make during a hand-off window does not allocate.
// What goes into a map is cloned first (typ and key may alias a network
// buffer).
type holdKey struct{ typ, key string }

func holdID(typ, key string) holdKey { return holdKey{typ, key} }

// drainPoll bounds the wait between two looks of a previous owner at a
// key it is asked to drain.
const drainPoll = 20 * time.Millisecond

// noteChange starts the hand-off window of a view change from old to v,
// and lets go of the keys held for a previous owner that v says is dead
// or gone. r.hmu not held.
func (r *Router) noteChange(old, v *view) {
	if r.cfg.Handoff <= 0 {
		return
	}
	now := time.Now()
	r.hmu.Lock()
	if !hasOthers(old) && hasOthers(v) {
		r.joinedAt = now
	}
	joined := r.joinedAt
	r.hmu.Unlock()
	ho := &handoff{prev: old}
	if !joined.IsZero() && now.Sub(joined) < r.cfg.Handoff {
		// This node joined (or was alone) within the window: what it owns
		// now was the others' before, as far as it knows, even where its
		// own earlier view, still partial, placed a key on itself. A
		// member that never ran a key answers a drain at once.
		others := make([]cluster.Member, 0, len(v.list))
		for _, m := range v.list {
			if m.ID != v.self {
				others = append(others, m)
			}
		}
		ho.fresh = newView(v.self, v.owning, others)
	}
	if len(ho.prev.list) > 0 || ho.fresh != nil {
		ho.timer = time.AfterFunc(r.cfg.Handoff, func() {
			ho.over.Store(true)
			r.handoff.CompareAndSwap(ho, nil)
		})
		if was := r.handoff.Swap(ho); was != nil && was.timer != nil {
			was.timer.Stop()
		}
		if ho.over.Load() {
			// The timer fired before the swap published ho: close it here.
			r.handoff.CompareAndSwap(ho, nil)
		}
	}
	r.hmu.Lock()
	clear(r.confirmed)
	r.changes.Add(1) // under hmu: a freeKey taken before the clear is stale
	var gone []holdKey
	for hid, h := range r.holds {
		if !waitsOn(v, h.prev) {
			gone = append(gone, hid)
		}
	}
	r.hmu.Unlock()
	for _, hid := range gone {
		go r.release(hid)
	}
}

// HandoffOpen reports whether a hand-off window is open or a key is
// held: until neither holds, a message to a key this node owns may be
// held and delivered through the router rather than in process.
func (r *Router) HandoffOpen() bool {
	return r.handoff.Load() != nil || r.holds0.Load() > 0
}

// hasOthers reports whether v lists a member other than this node.
func hasOthers(v *view) bool {
	for _, m := range v.list {
		if m.ID != v.self {
			return true
		}
	}
	return false
}

// waitsOn reports whether a key moving from prev is worth waiting for in
// view v: prev is still there, serving or leaving (draining).
func waitsOn(v *view, prev ring.NodeID) bool {
	st, ok := v.status[prev]
	return ok && st != cluster.StatusDead && st != cluster.StatusLeft
}

// mustHold reports whether a message for typ/key that this node owns is
// to be held now (so Here answers false for it: the runtime then hands it
// to the router, which holds it).
func (r *Router) mustHold(k host.RemoteKind, typ, key string, tok uint64) bool {
	prev, maybe := r.mayDrainFrom(k, typ, key, tok)
	if !maybe {
		return false
	}
	hid := holdID(typ, key)
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.holds[hid] != nil {
		return true
	}
	_, confirmed := r.confirmed[hid]
	return !prev.IsZero() && !confirmed
}

// mayDrainFrom is the check, without locks, that most messages stop at:
// no key is held and no change is recent, or the key's previous owner
// was this node (or is gone). Otherwise it reports true, with the
// previous owner to drain from if the window is open (zero when only
// holds remain).
func (r *Router) mayDrainFrom(k host.RemoteKind, typ, key string, tok uint64) (ring.NodeID, bool) {
	held := r.holds0.Load() > 0
	ho := r.handoff.Load()
	if ho == nil || k == nil || k.Pinned() {
		return ring.NodeID{}, held
	}
	v := r.view.Load()
	prev, ok := ho.prev.owner(k, typ, tok)
	if ho.fresh != nil && (!ok || prev.IsZero() || prev == v.self) {
		prev, ok = ho.fresh.owner(k, typ, tok)
	}
	if !ok || prev.IsZero() || prev == v.self || !waitsOn(v, prev) || r.isSilent(prev) {
		// A previous owner behind a broken link cannot be asked: the
		// key is served here at once rather than unavailable.
		return ring.NodeID{}, held
	}
	return prev, true
}

// freeKey is the last key a caller found free of any hold, with what
// that finding depends on: the hand-off window, the changes of view and
// the holds started when it was made. While none of them moved, the
// key is still free: a stream of tells mostly goes to one key, and the
// full check costs ring look-ups and a lock per message while a window
// is open. Each caller keeps its own (a peer's inbox worker), so the
// check that hits it shares nothing and writes nothing.
type freeKey struct {
	ho       *handoff
	changes  uint64
	started  uint64 // holds started: a count of live holds could stay put as one ends and another starts
	typ, key string // copies (envelope strings never alias a buffer)
}

// holdIfNeeded holds e, from from, for a key this node owns, if the key is
// (or now starts) waiting for its previous owner to drain it. It reports
// whether it held e. free, when not nil, is the caller's freeKey, which
// it consults and updates.
func (r *Router) holdIfNeeded(from ring.NodeID, k host.RemoteKind, e *envelope, free *freeKey) bool {
	if free == nil {
		return r.holdNow(from, k, e)
	}
	// Loaded before the check, so that whatever moves during it makes the
	// next call check again.
	now := freeKey{changes: r.changes.Load(), ho: r.handoff.Load(), started: r.holdsStarted.Load()}
	if now.ho == nil && r.holds0.Load() == 0 {
		return false // no window, no holds: mayDrainFrom's fast path
	}
	if now.ho == free.ho && now.changes == free.changes && now.started == free.started && e.typ == free.typ && e.key == free.key {
		return false
	}
	if r.holdNow(from, k, e) {
		return true
	}
	now.typ, now.key = e.typ, e.key
	*free = now
	return false
}

// holdIfNeededShared is holdIfNeeded with a freeKey that more than one
// goroutine may use (nil: none); it allocates only when the key it
// remembers changes.
func (r *Router) holdIfNeededShared(from ring.NodeID, k host.RemoteKind, e *envelope, free *atomic.Pointer[freeKey]) bool {
	if free == nil {
		return r.holdNow(from, k, e)
	}
	var mine freeKey
	if f := free.Load(); f != nil {
		mine = *f
	}
	was := mine
	if r.holdIfNeeded(from, k, e, &mine) {
		return true
	}
	if mine != was {
		f := mine
		free.Store(&f)
	}
	return false
}

// holdNow is holdIfNeeded without a freeKey.
func (r *Router) holdNow(from ring.NodeID, k host.RemoteKind, e *envelope) bool {
	prev, maybe := r.mayDrainFrom(k, e.typ, e.key, e.token)
	if !maybe {
		return false
	}
	return r.holdFor(prev, from, e)
}

// holdFor holds e, from from, for a key this node owns: behind the key's
// hold if it has one, or in a new hold that drains the key from prev (zero
// when only an existing hold may take e). It reports whether it held e.
func (r *Router) holdFor(prev, from ring.NodeID, e *envelope) bool {
	return r.holdItem(prev, from, e, nil)
}

// holdItem is holdFor, holding wake (when not nil) in e's place.
func (r *Router) holdItem(prev, from ring.NodeID, e *envelope, wake func(closed bool)) bool {
	hid := holdID(e.typ, e.key)
	r.hmu.Lock()
	h := r.holds[hid]
	start := h == nil
	if start {
		// mayDrainFrom saw prev still present, but a view that says it
		// left may have come since: noteChange, which stores the view
		// before it releases the holds on members gone, under r.hmu,
		// would then miss this one, and it would wait for a drain that
		// never comes. Looking again under r.hmu closes that gap.
		if _, confirmed := r.confirmed[hid]; confirmed || prev.IsZero() || !waitsOn(r.view.Load(), prev) {
			r.hmu.Unlock()
			return false
		}
		hid = holdKey{strings.Clone(e.typ), strings.Clone(e.key)}
		h = &hold{prev: prev, id: r.nextID.Add(1)}
		r.drainsN++
		r.holds[hid] = h
		r.drains[h.id] = hid
		r.holds0.Add(1)
		r.holdsStarted.Add(1)
		h.timer = time.AfterFunc(r.cfg.Handoff, func() {
			r.log.Warn("troupe: hand-off: the previous owner did not drain the key in time; serving it here", "actor", hid.typ+"/"+hid.key, "previous", h.prev)
			r.release(hid)
		})
	}
	h.items = append(h.items, heldItem{from: from, e: cloneEnvelope(e), at: time.Now(), wake: wake})
	r.hmu.Unlock()
	if start {
		d := &envelope{kind: kindDrain, id: h.id, token: e.token, typ: e.typ, key: e.key}
		if err := r.send(h.prev, e.token, d, true); err != nil {
			go r.release(hid)
		}
	}
	return true
}

// cloneEnvelope copies what e aliases (a network or encode buffer).
func cloneEnvelope(e *envelope) envelope {
	c := *e
	c.typ, c.key, c.name = strings.Clone(e.typ), strings.Clone(e.key), strings.Clone(e.name)
	c.body = append([]byte(nil), e.body...)
	return c
}

// release delivers what is held for hid, in order, then lets the key be
// served directly. What arrives meanwhile queues behind and is delivered
// by the same loop.
func (r *Router) release(hid holdKey) {
	r.hmu.Lock()
	h := r.holds[hid]
	if h == nil || h.releasing {
		r.hmu.Unlock()
		return
	}
	h.releasing = true
	h.timer.Stop()
	for {
		if len(h.items) == 0 {
			delete(r.holds, hid)
			delete(r.drains, h.id)
			r.holds0.Add(-1)
			if r.handoff.Load() != nil {
				r.confirmed[hid] = struct{}{}
			}
			r.hmu.Unlock()
			return
		}
		// One at a time: an ask withdrawn meanwhile is still in h.items
		// for dropHeld to find, unless it is the one being delivered.
		it := h.items[0]
		h.items = h.items[1:]
		r.hmu.Unlock()
		r.deliverHeld(&it)
		r.hmu.Lock()
	}
}

// deliverHeld serves a held tell or ask as if it arrived now, without
// holding it again.
func (r *Router) deliverHeld(it *heldItem) {
	if it.wake != nil {
		it.wake(false)
		return
	}
	e := &it.e
	switch e.kind {
	case kindTell:
		if k, ok := r.tellHereHold(it.from, e, r.routeOf(e.typ), false, nil); ok {
			if _, err := k.DeliverRemote(host.Inbound{Key: e.key, Name: e.name, Body: e.body, Trace: e.trace}); err != nil {
				r.dropped(e, err)
			}
		}
	case kindAsk:
		if e.ttl > 0 {
			e.ttl -= int64(time.Since(it.at))
			if e.ttl <= 0 {
				return // the asker gave up already
			}
		}
		r.serveAskHold(it.from, e, false, nil, nil)
	}
}

// dropHeld forgets a held ask that its asker withdrew; it reports whether
// it found one.
func (r *Router) dropHeld(sk servedKey) bool {
	if r.holds0.Load() == 0 {
		return false
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	for _, h := range r.holds {
		for i, it := range h.items {
			if it.e.kind == kindAsk && it.e.id == sk.id && it.from == sk.from {
				h.items = append(h.items[:i], h.items[i+1:]...)
				return true
			}
		}
	}
	return false
}

// drained handles a previous owner's answer to a drain request.
func (r *Router) drained(from ring.NodeID, e *envelope) {
	r.hmu.Lock()
	hid, ok := r.drains[e.id]
	if ok && r.holds[hid].prev != from {
		ok = false
	}
	r.hmu.Unlock()
	if ok {
		go r.release(hid)
	}
}

// serveDrain answers a new owner's drain request once this node's view
// no longer places the key here and the key has no activation here (or
// after Config.Handoff, or a second when that is unset).
func (r *Router) serveDrain(from ring.NodeID, e *envelope) {
	typ, key, tok, id := strings.Clone(e.typ), strings.Clone(e.key), e.token, e.id
	k := r.kind(typ)
	mv, _ := k.(host.Mover)
	limit := r.cfg.Handoff
	if limit <= 0 {
		limit = time.Second
	}
	go func() {
		deadline := time.Now().Add(limit)
		wait := time.Millisecond
		for {
			_, here, err := r.view.Load().dest(k, typ, key, tok)
			owns := here && err == nil
			if !owns && (mv == nil || !mv.Active(key)) {
				break
			}
			if time.Now().After(deadline) {
				r.log.Warn("troupe: hand-off: key still active here when its new owner took it", "actor", typ+"/"+key, "new owner", from, "owned here", owns)
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-r.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, drainPoll)
		}
		r.send(from, tok, &envelope{kind: kindDrained, id: id}, true)
	}()
}
