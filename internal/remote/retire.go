package remote

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/ring"
)

// An orderly leave must not run an ask twice. A member that leaves
// answers the asks it accepted while it drains, but the news that it
// left travels by gossip and may reach an asker before an answer does;
// an asker that then placed the ask again on the key's new owner would
// run it twice. So before it leaves, the member retires: once every ask
// it accepted from another node is answered, it refuses every later one
// as not its own and tells each peer so on every lane, after the answers
// that lane carries (a lane keeps its order). An ask still unanswered on
// a lane whose retirement arrived never ran on that member and is placed
// again; one unanswered when the member left without retiring on its lane
// (its drain outlasted the leave timeout, or the news overtook the
// retirement for longer than retireGrace) may have run, and fails with
// ErrOutcomeUnknown unless running it twice is safe (read-only or keyed).

// retireGrace is how long an ask waits, after its owner left in order,
// for the owner's retirement on its lane: the owner sent it before it
// announced the leave, so it is normally there first or just behind. A
// lane that stays silent longer than Config.Silence counts as broken (see
// relay.go), so that is the grace where it is set; defaultRetireGrace
// where it is not.
func (r *Router) retireGrace() time.Duration {
	if r.cfg.Silence > 0 {
		return r.cfg.Silence
	}
	return defaultRetireGrace
}

// defaultRetireGrace is retireGrace without Config.Silence.
const defaultRetireGrace = 2 * time.Second

// Retire ends this node's service of other nodes' asks, for an orderly
// leave, once every ask it accepted from another node has been answered
// (answers that went alone taken too): from then on it refuses asks as
// not its own, and it tells every peer it has a link to that it retired,
// on each lane. It returns an error, having told no one, if ctx ends
// first: the askers then treat what they still wait on here as of
// unknown outcome.
func (r *Router) Retire(ctx context.Context) error {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return fault.ErrSystemClosed
		}
		if r.idleNowLocked() {
			r.retired.Store(true)
			r.mu.Unlock()
			break
		}
		n := len(r.serving) + len(r.replying) + r.answering
		if r.idle == nil {
			r.idle = make(chan struct{})
		}
		idle := r.idle
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("troupe: retire: %d asks of other nodes still unanswered: %w", n, ctx.Err())
		case <-idle:
		}
	}
	// The members this node sees, and the peers it has a link to (the
	// clients that asked among them).
	peers := map[ring.NodeID]struct{}{}
	for _, m := range r.view.Load().list {
		if serves(m.Status) || m.Status == cluster.StatusLeaving {
			peers[m.ID] = struct{}{}
		}
	}
	if ob := r.outboxes.Load(); ob != nil {
		for peer := range *ob {
			peers[peer] = struct{}{}
		}
	}
	delete(peers, r.self())
	r.mu.Lock()
	unanswered := maps.Clone(r.unanswered)
	r.mu.Unlock()
	for peer := range peers {
		for lane := range uint64(numLanes) {
			if unanswered[peer]&(1<<lane) != 0 {
				continue // a reply on it was lost: what waits there may have run
			}
			if err := r.send(peer, lane, &envelope{kind: kindRetired, id: lane}, true); err != nil {
				r.log.Debug("troupe: retirement not sent", "to", peer, "lane", lane, "err", err)
			}
		}
	}
	return nil
}

// idleNowLocked reports whether no ask of another node is served or
// answered here. r.mu is held.
func (r *Router) idleNowLocked() bool {
	return len(r.serving) == 0 && len(r.replying) == 0 && r.answering == 0
}

// idleLocked wakes a Retire waiting for the asks of other nodes once
// none is left. r.mu is held.
func (r *Router) idleLocked() {
	if r.idle != nil && r.idleNowLocked() {
		close(r.idle)
		r.idle = nil
	}
}

// retiredOn handles a peer's retirement on a lane: the asks this node
// sent it whose answers travel that lane and are still unanswered never
// ran there, and are placed again.
func (r *Router) retiredOn(from ring.NodeID, lane uint64) {
	if lane >= numLanes {
		return
	}
	r.mu.Lock()
	r.retiredLanes[from] |= 1 << lane // until the view drops it (Update)
	var again, refused []*pending
	var backoffs []time.Duration
	var changed <-chan struct{}
	for id, p := range r.pending {
		if p.to != from || uint64(laneOf(id)) != lane {
			continue
		}
		if p.retries >= maxRetries {
			delete(r.pending, id)
			refused = append(refused, p)
			continue
		}
		p.retries++
		p.prev, p.hint = from, ring.NodeID{}
		var backoff time.Duration
		changed, backoff = r.unplaceLocked(p)
		again, backoffs = append(again, p), append(backoffs, backoff)
	}
	r.mu.Unlock()
	for _, p := range refused {
		p.done.Reply(nil, fmt.Errorf("%w: %s/%s: %d members in turn would not serve it", fault.ErrUnavailable, p.out.Type, p.out.Key, maxRetries+1))
	}
	for i, p := range again {
		r.retryLater(p.id, p, changed, backoffs[i])
	}
}

// graceOver fails the asks still waiting on a member that left in order
// without retiring on their lanes: they may have run there.
func (r *Router) graceOver(to ring.NodeID) {
	r.mu.Lock()
	delete(r.graces, to)
	var failed []*pending
	for id, p := range r.pending {
		if p.to == to {
			delete(r.pending, id)
			failed = append(failed, p)
		}
	}
	r.mu.Unlock()
	for _, p := range failed {
		p.done.Reply(nil, fault.OutcomeUnknown("owner %v left before answering, without saying it had not run the request; it may have run", to))
	}
}
