package remote

import (
	"slices"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/ring"
)

// Relaying around a broken link.
//
// Membership can keep two members alive and in each other's rings while
// the link between them is down (every other member still hears both and
// refutes the suspicion). Sent straight to the owner, their requests to
// each other would wait for their deadlines as long as the link stays
// down. Instead, a member whose link to a peer has been silent for
// Config.Silence (no byte heard: the transport's keepalive, tied to the cluster
// timings, keeps a live link from ever being that silent) sends what it
// has for that peer through another member it does hear, chosen by key
// token, so one key's messages take one path:
//
//   - a tell goes to the relay as to any non-owner, which forwards it once;
//   - an ask goes to the relay marked relayed (hops 1); a relay that does
//     not own the key asks the owner itself and answers with the outcome.
//     A cancel follows the ask to the relay, which withdraws its own ask.
//
// Only new sends take the detour: asks already waiting on the silent
// peer keep waiting (their replies arrive if the link resumes) until
// their deadline or the peer's death, so no request is run twice by the
// switch. The link counts as restored as soon as anything is heard from
// the peer again (membership keeps pinging it).

// silenceTick is how often, as a fraction of Config.Silence, the router
// looks for silent peers.
const silenceTick = 4

// watchSilence marks the serving members not heard from for silence, and
// unmarks them once heard, until the router closes.
func (r *Router) watchSilence(silence time.Duration) {
	t := time.NewTicker(silence / silenceTick)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case now := <-t.C:
			r.markSilent(now, silence)
		}
	}
}

// markSilent recomputes the set of silent peers at now.
func (r *Router) markSilent(now time.Time, silence time.Duration) {
	v := r.view.Load()
	ep := r.endpoint()
	old := r.silent.Load()
	var next map[ring.NodeID]time.Time
	for _, m := range v.list {
		id := m.ID
		if id == v.self || !serves(m.Status) {
			continue
		}
		heard, ok := ep.LastHeard(id)
		if !ok {
			// No session (never talked, or forgotten after the resume
			// grace): keep the verdict it had.
			if at, was := (*old)[id]; was {
				next = put(next, id, at)
			}
			continue
		}
		if now.Sub(heard) <= silence {
			continue
		}
		next = put(next, id, heard)
	}
	// Log the changes (comparing sizes would miss one peer going silent
	// as another is heard again).
	for id := range next {
		if _, was := (*old)[id]; !was {
			r.log.Warn("troupe: link to a member silent; relaying through others", "peer", id, "silence", silence)
		}
	}
	for id := range *old {
		if _, still := next[id]; !still {
			r.log.Info("troupe: link to a member heard again; sending directly", "peer", id)
		}
	}
	r.silent.Store(&next)
}

func put(m map[ring.NodeID]time.Time, id ring.NodeID, at time.Time) map[ring.NodeID]time.Time {
	if m == nil {
		m = map[ring.NodeID]time.Time{}
	}
	m[id] = at
	return m
}

// isSilent reports whether the link to id counts as broken.
func (r *Router) isSilent(id ring.NodeID) bool {
	s := *r.silent.Load()
	if len(s) == 0 {
		return false
	}
	_, ok := s[id]
	return ok
}

// RelayStats are what relaying did, for the metrics.
type RelayStats struct {
	// Sent counts the tells and asks this node sent through another
	// member because its link to the key's owner was silent.
	Sent uint64
	// Silent is the number of members whose link counts as broken now.
	Silent int
}

// Relays returns what relaying did so far.
func (r *Router) Relays() RelayStats {
	return RelayStats{Sent: r.relayed.Load(), Silent: len(*r.silent.Load())}
}

// relayFor returns the member through which to reach to, silent, for the
// key of token, of type typ: an alive member hosting typ (it must know
// the type to route it), other than this node and to, not silent itself,
// picked by token among those.
func (r *Router) relayFor(v *view, to ring.NodeID, typ string, token uint64) (ring.NodeID, bool) {
	silent := *r.silent.Load()
	var cands []ring.NodeID
	for _, m := range v.list {
		id := m.ID
		if id == v.self || id == to || m.Status != cluster.StatusAlive || !slices.Contains(m.ActorTypes, typ) {
			continue
		}
		if _, s := silent[id]; s {
			continue
		}
		cands = append(cands, id)
	}
	if len(cands) == 0 {
		// Nobody to go through: send straight, and wire resends it if
		// the link resumes.
		return ring.NodeID{}, false
	}
	return cands[token%uint64(len(cands))], true
}

// relayAsk serves an ask that another node relayed through this one for
// a key this node does not own: it asks the owner itself, never relaying
// again, and answers from with the outcome. A cancel from the asker
// withdraws it, and so do the asker's death and the deadline.
func (r *Router) relayAsk(from ring.NodeID, e *envelope) {
	sk := servedKey{from: from, id: e.id}
	askerID := e.id
	// Copied whole: the ask outlives the batch it came in.
	c := cloneEnvelope(e)
	out := host.Outbound{Type: c.typ, Key: c.key, Token: c.token, Name: c.name, Body: c.body, Chain: c.chain, RequestID: c.rid, IdempotencyKey: c.idem, Trace: c.trace}
	var ttl time.Duration
	if e.ttl > 0 {
		ttl = time.Duration(e.ttl)
		out.Deadline = time.Now().Add(ttl)
	}
	id := r.nextID.Add(1)
	s := &served{}
	p := &pending{id: id, r: r, out: out, direct: true}
	p.done = host.ReplyFunc(func(body []byte, err error) {
		r.replyServed(sk, s, askerID, body, err)
	})
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.answer(from, askerID, nil, fault.ErrSystemClosed)
		return
	}
	if r.retired.Load() {
		// It told its askers it runs nothing more, relays included (see
		// Retire): the asker places the ask again.
		r.mu.Unlock()
		r.answer(from, askerID, nil, &notOwnerError{})
		return
	}
	s.cancel = p // withdraws it
	r.serving[sk] = s
	if ttl > 0 {
		s.timer = time.AfterFunc(ttl, func() { r.cancelServed(sk) })
	}
	r.mu.Unlock()
	if err := r.dispatch(id, p); err != nil {
		p.done.Reply(nil, err)
		return
	}
	r.mu.Lock()
	cancelled := s.cancelled
	r.mu.Unlock()
	if cancelled {
		r.withdraw(id) // the cancel came while it was being sent
	}
}
