package system

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicanode"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// Hand-off of stored state.
//
// When the ring of a type that keeps state on the ring changes (a member
// joins, leaves or is removed), a member that becomes a replica of a
// range it was not a replica of before stops counting toward quorums for
// that range at once (the range is receiving) and copies it from the
// range's previous replicas: from n-q+1 of the n (q the write level's
// quorum), which meets every quorum of the previous set, so that it holds
// what any of them acknowledged before it counts. The copy fences the
// range at its sources first (replicanode.Node.CopyFenced): an owner whose
// view lags the change gets no write acknowledged by them from then on,
// and owners already on the new view acquire again above the fence,
// keeping what waited on them (docs/replication.md, "Hand-off").
// Meanwhile the other replicas, and the previous set through joint
// acquisition, answer for the range. The copy is paced by the driver's
// SyncRate so that application traffic keeps flowing.
//
// A joining member enters the ring only once it is ready, so its own
// join is such a change and nothing special: it receives every range it
// gains from members already in the ring.

// storedType is a type whose keys the ring places, with state: n copies
// written at level.
type storedType struct {
	name  string
	n     int
	level replication.Level
}

// storedTypes lists defs' types whose new replicas receive their ranges:
// durable, not pinned (a pinned key's copy lives on its member and never
// moves), and kept as one copy or written at Majority or All. Copies
// written at One promise no more than the owner's own (see
// replication.One), and catching them up would need every previous
// replica.
func storedTypes(defs []actor.Definition) []storedType {
	var ts []storedType
	for _, d := range defs {
		if d == nil {
			continue
		}
		st := runtime.StorageOf(d)
		if st.Durable && !st.Pinned && (st.Replicas <= 1 || st.Level != replication.One) {
			ts = append(ts, storedType{name: d.Name(), n: max(st.Replicas, 1), level: st.Level})
		}
	}
	return ts
}

// rangeJob is one range this member gained and is receiving.
type rangeJob struct {
	typ string
	rng ring.Range
	// prev is the range's previous replica set; sources the members
	// asked for it (see sourcesOf), and need how many must deliver.
	prev    []ring.NodeID
	sources []ring.NodeID
	need    int
	// departed lists the members of prev gone from the ring since (they
	// left, were removed or replaced by a newer process): the copy's
	// fences name them, so that an owner whose view still holds one of
	// them, and so gives the key prev again, is refused
	// (docs/replication.md, "Where views disagree").
	departed []ring.NodeID
	// retry wakes an attempt waiting to run again; cancel ends the job,
	// and stop the attempt under way (under handoffs.mu), which a change
	// of sources restarts.
	retry  chan struct{}
	cancel context.CancelFunc
	stop   context.CancelFunc
}

// handoffs tracks the ranges a node is receiving after ring changes.
type handoffs struct {
	mu   sync.Mutex
	jobs map[handoffKey]*rangeJob
	// slots bounds the catch-ups running at once: a join gains hundreds
	// of ranges, and each source answers one request at a time.
	slots chan struct{}
}

type handoffKey struct {
	typ string
	rng ring.Range
}

// handoffParallel is how many ranges a member catches up at once.
const handoffParallel = 4

// Pauses between two attempts of a range's catch-up that could not
// complete (a source unreachable or still receiving itself): doubling
// from the first to the last.
const (
	handoffRetryMin = 50 * time.Millisecond
	handoffRetryMax = time.Second
)

// rings returns the current full ring of each stored type (a leaving
// member is out of it already: see remote's view).
func (s *states) rings() map[string]*ring.Ring {
	if s.ring == nil || len(s.stored) == 0 {
		return nil
	}
	rs := make(map[string]*ring.Ring, len(s.stored))
	for _, t := range s.stored {
		rs[t.name] = s.ring(t.name)
	}
	return rs
}

// changed handles a change of the stored types' rings from before to the
// current ones: ranges this member newly replicates are set receiving
// and caught up from their previous replicas; running catch-ups drop the
// sources gone meanwhile and end when this member no longer replicates
// their range.
func (s *states) changed(before map[string]*ring.Ring) {
	node, err := s.current()
	if err != nil || len(s.stored) == 0 {
		return
	}
	self := node.Self()
	after := s.rings()
	h := s.handoffsOf(node)
	h.mu.Lock()
	defer h.mu.Unlock()
	var narrowed []*rangeJob
	mine := map[string][]ring.Range{} // by type: the ranges self replicates, shared by its jobs
	for _, j := range slices.Collect(maps.Values(h.jobs)) {
		narrowed = append(narrowed, s.review(node, h, j, self, after[j.typ], mine)...)
	}
	for _, j := range narrowed {
		if !s.goCatchUp(node, func(ctx context.Context) { s.receive(ctx, node, h, j) }, &j.cancel) {
			for _, o := range narrowed {
				delete(h.jobs, handoffKey{typ: o.typ, rng: o.rng})
			}
			return // detached meanwhile
		}
	}
	existing := slices.Collect(maps.Values(h.jobs))
	var gained []*rangeJob
	for _, t := range s.stored {
		for _, mv := range ring.Moves(before[t.name], after[t.name], t.n) {
			if !slices.Contains(mv.After, self) || slices.Contains(mv.Before, self) || len(mv.Before) == 0 {
				continue
			}
			k := handoffKey{typ: t.name, rng: mv.Range}
			if h.jobs[k] != nil {
				continue
			}
			need := len(mv.Before) - t.level.Quorum(len(mv.Before)) + 1
			// A copy takes every type's records in its range: types on
			// the same ring with the same replicas share one.
			covered := func(o *rangeJob) bool {
				return o.rng == mv.Range && slices.Equal(o.prev, mv.Before) && o.need >= need
			}
			if slices.ContainsFunc(gained, covered) || slices.ContainsFunc(existing, covered) {
				continue
			}
			j := &rangeJob{typ: t.name, rng: mv.Range, prev: mv.Before, retry: make(chan struct{}, 1)}
			for _, id := range mv.Before {
				if !after[t.name].Contains(id) {
					j.departed = append(j.departed, id)
				}
			}
			j.need = need
			j.sources = s.sourcesOf(j.prev)
			s.trimNeed(j)
			node.Awaiting(j.typ, j.rng, j.sources)
			gained = append(gained, j)
		}
	}
	if len(gained) == 0 {
		return
	}
	ranges := make([]ring.Range, len(gained))
	for i, j := range gained {
		ranges[i] = j.rng
	}
	if err := node.SetReceiving(ranges...); err != nil {
		return
	}
	s.log.Info("troupe: receiving the copies of ranges this member now replicates", "ranges", len(ranges))
	for _, j := range gained {
		ok := s.goCatchUp(node, func(ctx context.Context) {
			s.receive(ctx, node, h, j)
		}, &j.cancel)
		if !ok {
			return // detached meanwhile: the next node catches up what its store receives
		}
		h.jobs[handoffKey{typ: j.typ, rng: j.rng}] = j
	}
}

// review updates a running catch-up after a ring change: it ends when
// this member no longer replicates the range (the range stays receiving,
// and a later gain starts it again), and forgets sources now gone, which
// will never answer. A job whose member still replicates only part of its
// range is replaced by one per part, returned to be started (already in
// h.jobs), and the rest ends receiving: a copy fences its whole range at
// its sources, and fencing keys whose sets no longer hold this member
// would make their owners step down for nothing. h.mu is held.
func (s *states) review(node *replicanode.Node, h *handoffs, j *rangeJob, self ring.NodeID, r *ring.Ring, mine map[string][]ring.Range) []*rangeJob {
	var t *storedType
	for i := range s.stored {
		if s.stored[i].name == j.typ {
			t = &s.stored[i]
		}
	}
	var kept, dropped []ring.Range
	if t != nil && r != nil {
		m, ok := mine[j.typ]
		if !ok {
			m = replicatedBy(r, t.n, self)
			mine[j.typ] = m
		}
		kept, dropped = split(m, j.rng)
	}
	if len(kept) == 0 {
		// No longer a replica of any of the range: nothing to wait for.
		// Its receiving ends, but for what another catch-up covers (a
		// later gain receives it again).
		j.cancel()
		delete(h.jobs, handoffKey{typ: j.typ, rng: j.rng})
		node.Awaiting(j.typ, j.rng, nil)
		s.endReceiving(h, j.rng)
		return nil
	}
	if next := s.sourcesOf(j.prev); !slices.Equal(next, j.sources) {
		j.sources = next
		s.trimNeed(j)
		node.Awaiting(j.typ, j.rng, j.sources)
		// An attempt under way would wait on the gone sources for ever.
		if j.stop != nil {
			j.stop()
		}
		select {
		case j.retry <- struct{}{}:
		default:
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	j.cancel()
	delete(h.jobs, handoffKey{typ: j.typ, rng: j.rng})
	node.Awaiting(j.typ, j.rng, nil)
	parts := make([]*rangeJob, 0, len(kept))
	for _, g := range kept {
		k := handoffKey{typ: j.typ, rng: g}
		if h.jobs[k] != nil {
			continue
		}
		p := &rangeJob{typ: j.typ, rng: g, prev: j.prev, sources: slices.Clone(j.sources), need: j.need, departed: j.departed, retry: make(chan struct{}, 1)}
		h.jobs[k] = p
		node.Awaiting(j.typ, g, p.sources)
		parts = append(parts, p)
	}
	s.endReceiving(h, j.rng)
	return parts
}

// replicatedBy returns the ranges where self is among the first n
// replicas on r: a pass over the ring, which review makes once per type
// for all of its jobs.
func replicatedBy(r *ring.Ring, n int, self ring.NodeID) []ring.Range {
	if !r.Contains(self) {
		return nil
	}
	var mine []ring.Range
	for _, mv := range ring.Moves(r.Without(self), r, n) {
		if slices.Contains(mv.After, self) {
			mine = append(mine, mv.Range)
		}
	}
	return mine
}

// split splits rng into the parts in mine and the others.
func split(mine []ring.Range, rng ring.Range) (kept, dropped []ring.Range) {
	whole := []ring.Range{rng}
	dropped = replica.Subtract(whole, mine...)
	if len(dropped) == 0 {
		return whole, nil
	}
	return replica.Subtract(whole, dropped...), dropped
}

// endReceiving makes the node count for rng again, but for the ranges
// other catch-ups under way still receive. h.mu is held, so that a later
// SetReceiving is ordered after it.
func (s *states) endReceiving(h *handoffs, rng ring.Range) {
	var others []ring.Range
	for _, o := range h.jobs {
		others = append(others, o.rng)
	}
	rest := replica.Subtract([]ring.Range{rng}, others...)
	node, err := s.current()
	if err != nil || len(rest) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), endReceivingTimeout)
	defer cancel()
	if err := node.EndReceiving(ctx, rest...); err != nil {
		s.log.Debug("troupe: ending the receiving of a range", "err", err)
	}
}

// endReceivingTimeout bounds the wait for the node's loop to record the
// end of a range's receiving.
const endReceivingTimeout = 5 * time.Second

// sourcesOf returns the members to copy a range from, given its previous
// replica set prev: a member that left (having handed its copies over),
// that the view no longer holds (removed) or that is dead is left out: it
// will never answer. A dead member's copies are on its disk, though, and
// a process that restarted on it answers for it: the member alive at its
// address with a newer incarnation takes its place. Waiting for a dead
// member instead would keep the range from counting until the member is
// removed (RemoveAfter), and a member that dies while those it joined
// with still copy from it would hold their ranges that long.
func (s *states) sourcesOf(prev []ring.NodeID) []ring.NodeID {
	var alive []ring.NodeID
	var out []ring.NodeID
	for _, id := range prev {
		st, ok := s.status(id)
		switch {
		case !ok || st == cluster.StatusLeft:
			continue
		case st == cluster.StatusDead:
			if alive == nil {
				alive = s.alive()
			}
			i := slices.IndexFunc(alive, func(a ring.NodeID) bool { return a.Addr == id.Addr && a.Incarnation > id.Incarnation })
			if i < 0 {
				continue
			}
			id = alive[i]
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// trimNeed lowers j's need to the sources left: what only replicas that
// left, died or were removed held is lost with them, unless a dead one
// comes back at its address.
func (s *states) trimNeed(j *rangeJob) {
	if j.need > len(j.sources) {
		s.log.Warn("troupe: a range's previous replicas are gone: what only they acknowledged is lost", "type", j.typ, "range", j.rng, "sources", len(j.sources), "needed", j.need)
		j.need = len(j.sources)
	}
}

// receive runs j's catch-up until it completes or ctx ends.
func (s *states) receive(ctx context.Context, node *replicanode.Node, h *handoffs, j *rangeJob) {
	defer func() {
		h.mu.Lock()
		if h.jobs[handoffKey{typ: j.typ, rng: j.rng}] == j {
			delete(h.jobs, handoffKey{typ: j.typ, rng: j.rng})
			node.Awaiting(j.typ, j.rng, nil)
		}
		h.mu.Unlock()
	}()
	// done ends the job once its range is copied.
	done := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.jobs[handoffKey{typ: j.typ, rng: j.rng}] != j {
			return // ended by a ring change meanwhile
		}
		delete(h.jobs, handoffKey{typ: j.typ, rng: j.rng})
		node.Awaiting(j.typ, j.rng, nil)
		s.endReceiving(h, j.rng)
		s.pokeWaker() // keys of the range may now be woken
	}
	wait := handoffRetryMin
	for attempt := 0; ; attempt++ {
		select {
		case h.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		// Sources are read once the slot is taken: a change while this
		// attempt waited for it has already applied.
		actx, stop := context.WithCancel(ctx)
		h.mu.Lock()
		sources, need := slices.Clone(j.sources), j.need
		j.stop = stop
		h.mu.Unlock()
		var err error
		if need > 0 {
			err = node.CopyFenced(actx, j.rng, sources, need, j.departed)
		} // else every previous replica is gone: there is nothing to copy
		<-h.slots
		stop()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			done()
			return
		}
		if attempt%20 == 19 {
			s.log.Warn("troupe: catching up a range this member now replicates", "type", j.typ, "range", j.rng,
				"previous", fmt.Sprint(j.prev), "sources", fmt.Sprint(sources), "need", need, "err", err, "attempt", attempt+1)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-j.retry:
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, handoffRetryMax)
	}
}

// handoffsOf returns the catch-ups of node, the current node.
func (s *states) handoffsOf(node *replicanode.Node) *handoffs {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handoff == nil || s.handoffNode != node {
		s.handoff = &handoffs{jobs: map[handoffKey]*rangeJob{}, slots: make(chan struct{}, handoffParallel)}
		s.handoffNode = node
	}
	return s.handoff
}

// handOver runs while this member leaves, once its queues drained: it
// keeps answering the catch-ups of the members that take its ranges
// over, until none has read from it for settle (and at least settle
// after the leave began, so that they heard of it), or ctx ends. Its
// copies so reach their new replicas before it goes, the single copy of
// a one-copy key included.
func (s *states) handOver(ctx context.Context, settle time.Duration) {
	node, err := s.current()
	if err != nil || len(s.stored) == 0 {
		return
	}
	start := time.Now()
	t := time.NewTicker(settle / 8)
	defer t.Stop()
	for {
		open, last := node.Serving()
		if open == 0 && time.Since(start) >= settle && time.Since(last) >= settle {
			return
		}
		select {
		case <-ctx.Done():
			s.log.Warn("troupe: leaving before every catch-up reading from this member ended", "open", open)
			return
		case <-t.C:
		}
	}
}
