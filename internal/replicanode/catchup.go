package replicanode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
)

// syncQueue is how many catch-up requests a source holds before it drops
// more (their requesters ask again).
const syncQueue = 16

// syncRetryTicks is how many tick periods a catch-up waits for a chunk
// before it asks its source again.
const syncRetryTicks = 20

// syncWait is one catch-up request waiting for its chunk.
type syncWait struct {
	from  ring.NodeID
	chunk chan chunk
}

type chunk struct {
	msg  replica.Message
	size int
}

// Receiving returns the ring ranges this node still receives: its answers
// about keys in them do not count toward quorums. None means it counts
// everywhere.
func (n *Node) Receiving() []ring.Range {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.receiving)
}

// CatchUp copies the records of rng from sources (the range's other
// replicas, dead ones included, each counted once) and, once quorum of
// them delivered the whole range, stops receiving rng: the node counts
// for its keys from then on.
//
// Each source sends the records it holds in rng in ring order, in chunks
// of at most Config.SyncChunk bytes (or one key's records), one chunk in
// flight per source, at most Config.SyncRate bytes per second over all
// sources. Each record is kept if it is newer than the one held in its
// slot (a promise if it is newer than the one held), and a chunk counts
// only once it is persisted; the end of receiving rng is recorded in the
// store before CatchUp returns. A source still receiving part of rng
// itself fails with ErrSourceReceiving; a source that does not answer is
// asked again. The catch-up fails when too few sources can still deliver,
// or when ctx ends (ErrUnavailable); what was copied stays, and the node
// keeps receiving rng.
//
// Caught up means holding, per slot, the newest record among quorum of
// the sources. The caller chooses sources and quorum so that any quorum
// that acknowledged a write meets the sources that deliver: the range's
// previous replica set of n written at a quorum of q, with quorum n-q+1
// of it (a new replica after a ring change), or the n-1 other replicas
// with a majority of them (a replica that lost its last writes). CatchUp
// refuses a quorum outside 1..len(sources) (ErrCatchUpQuorum) and a
// source list that names this node (ErrCatchUpSource). The node must
// already be receiving
// rng (started receiving, or SetReceiving) before the catch-up begins: a
// write acknowledged before the snapshots reached a quorum, which meets
// the sources read; one acknowledged after reached this node too, since
// it stores every accept it is sent while receiving.
func (n *Node) CatchUp(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int) error {
	if err := n.Copy(ctx, rng, sources, quorum); err != nil {
		return err
	}
	return n.call(ctx, &request{op: opReceived, ranges: []ring.Range{rng}})
}

// Copy is CatchUp without its end: the node keeps receiving rng, for a
// caller that ends receiving (EndReceiving) what no other catch-up of
// its own still covers.
func (n *Node) Copy(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int) error {
	return n.copyRange(ctx, rng, sources, quorum, false)
}

// CopyFenced is Copy for a hand-off: before it reads rng from a source,
// it fences rng there (MsgFence, see replica.Fencer), so that an owner of
// the previous set acquired before the fence, whose view of membership
// may lag, gets no write acknowledged by quorum sources from then on;
// only fenced sources count toward quorum, each once its copy is done.
// An owner fenced so steps down and acquires again above the fence. A
// source still receiving part of rng fails the fencing with
// ErrSourceReceiving, as it fails a copy.
func (n *Node) CopyFenced(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int) error {
	return n.copyRange(ctx, rng, sources, quorum, true)
}

func (n *Node) copyRange(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int, fence bool) error {
	sources = slices.Clone(sources)
	slices.SortFunc(sources, ring.NodeID.Compare)
	sources = slices.Compact(sources)
	if slices.Contains(sources, n.self) {
		return fmt.Errorf("%w: %v", ErrCatchUpSource, n.self)
	}
	if quorum < 1 || quorum > len(sources) {
		return fmt.Errorf("%w: quorum %d of %d sources", ErrCatchUpQuorum, quorum, len(sources))
	}
	if fence {
		fenced, err := n.fence(ctx, rng, sources, quorum)
		if err != nil {
			return err
		}
		sources = fenced
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan error, len(sources))
	var wg sync.WaitGroup
	for _, src := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- n.syncFrom(sctx, rng, src)
		}()
	}
	delivered, failed := 0, 0
	var errs []error
	for delivered < quorum && len(sources)-failed >= quorum {
		err := <-results
		if err == nil {
			delivered++
			continue
		}
		failed++
		errs = append(errs, err)
	}
	cancel()
	wg.Wait()
	if delivered < quorum {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: catch-up of %v: %w", ErrUnavailable, rng, err)
		}
		return fmt.Errorf("troupe: catch-up of %v: %d of %d sources delivered, %d needed: %w", rng, delivered, len(sources), quorum, errors.Join(errs...))
	}
	return nil
}

// fence fences rng at sources until quorum of them are fenced (see
// replica.Fencer) and returns those. A fencing round is sent again to the
// sources that did not answer it every syncRetryTicks tick periods.
func (n *Node) fence(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int) ([]ring.NodeID, error) {
	known := &request{op: opHighestTerm, ranges: []ring.Range{rng}}
	if err := n.call(ctx, known); err != nil {
		return nil, err
	}
	id := n.syncID.Add(1)
	answers := make(chan replica.Message, 2*len(sources))
	n.mu.Lock()
	n.fences[id] = answers
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.fences, id)
		n.mu.Unlock()
	}()
	f := replica.NewFencer(n.self, id, rng, sources, quorum, known.term)
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		if f.Blocked() {
			if f.Exhausted() {
				return nil, fmt.Errorf("troupe: fence %v: %w", rng, replica.ErrTermExhausted)
			}
			return nil, fmt.Errorf("%w: %v for %v", ErrSourceReceiving, f.Receiving(), rng)
		}
		for _, m := range f.Messages() {
			n.post(m)
		}
		retry.Reset(syncRetryTicks * n.cfg.TickEvery)
	wait:
		for {
			select {
			case m := <-answers:
				newRound := f.Step(m)
				if fenced, ok := f.Fenced(); ok {
					return fenced, nil
				}
				if newRound || f.Blocked() {
					break wait
				}
			case <-retry.C:
				break wait
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: fence %v: %w", ErrUnavailable, rng, ctx.Err())
			case <-n.done:
				return nil, n.closedErr()
			}
		}
	}
}

// EndReceiving makes the node count for ranges again: after Copy, or
// without copying where nothing is left to copy or the node no longer
// replicates a range.
func (n *Node) EndReceiving(ctx context.Context, ranges ...ring.Range) error {
	if len(ranges) == 0 {
		return nil
	}
	return n.call(ctx, &request{op: opReceived, ranges: slices.Clone(ranges)})
}

// ReceivedBytes returns the bytes of catch-up chunks this node received.
func (n *Node) ReceivedBytes() int64 { return n.synced.Load() }

// syncFrom copies rng from src, a chunk at a time, until src says done.
func (n *Node) syncFrom(ctx context.Context, rng ring.Range, src ring.NodeID) error {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	cursor := rng.Start
	for {
		// Every request waits for the budget of the chunks before it,
		// the first of a session included: a join copies hundreds of
		// ranges, most of them one chunk.
		if err := n.pace.wait(ctx); err != nil {
			return err
		}
		id := n.syncID.Add(1)
		w := &syncWait{from: src, chunk: make(chan chunk, 1)}
		n.mu.Lock()
		n.syncs[id] = w
		n.mu.Unlock()
		req := replica.Message{Type: replica.MsgSyncRequest, From: n.self, To: src, Round: id, Range: rng, Cursor: cursor, Limit: uint64(n.cfg.SyncChunk)}
		c, err := n.await(ctx, req, w, retry)
		n.mu.Lock()
		delete(n.syncs, id)
		n.mu.Unlock()
		if err != nil {
			return err
		}
		if !c.msg.Counted {
			return fmt.Errorf("%w: %v for %v", ErrSourceReceiving, src, rng)
		}
		n.synced.Add(int64(c.size))
		n.pace.charge(c.size)
		if len(c.msg.Records) > 0 {
			if err := n.call(ctx, &request{op: opSync, records: c.msg.Records}); err != nil {
				return err
			}
		}
		if c.msg.Done {
			return nil
		}
		cursor = c.msg.Cursor
	}
}

// await sends req and waits for its chunk, asking again every
// syncRetryTicks tick periods.
func (n *Node) await(ctx context.Context, req replica.Message, w *syncWait, retry *time.Timer) (chunk, error) {
	for {
		n.post(req)
		retry.Reset(syncRetryTicks * n.cfg.TickEvery)
		select {
		case c := <-w.chunk:
			return c, nil
		case <-retry.C:
		case <-ctx.Done():
			return chunk{}, ctx.Err()
		case <-n.done:
			return chunk{}, n.closedErr()
		}
	}
}

// post sends one message in an envelope of its own, from any goroutine.
func (n *Node) post(m replica.Message) {
	enc := replica.AppendEncode(nil, m)
	buf := n.ep.Buffer(len(enc) + 2*10 + 1)
	buf = appendEnvelope(buf, enc, []int{len(enc)})
	if err := n.ep.Post(m.To, transport.StreamReplication, 0, buf); err != nil {
		// A request is asked again; a chunk that cannot be posted (too
		// large for the transport, say) stalls its catch-up, which the
		// operator must see.
		level := slog.LevelDebug
		if m.Type == replica.MsgSyncChunk {
			level = slog.LevelWarn
		}
		n.log.Log(context.Background(), level, "a catch-up message was not sent", "to", m.To.String(), "type", m.Type.String(), "bytes", len(enc), "err", err)
	}
}

// serveSyncs answers catch-up requests as a source, one at a time, until
// the loop stops.
func (n *Node) serveSyncs() {
	defer close(n.syncDone)
	for {
		select {
		case <-n.syncCtx.Done():
			return
		case m := <-n.syncReqs:
			n.answerSync(m)
		}
	}
}

// answerSync sends the records of m's range after its cursor, in ring
// order, up to its limit (and this node's SyncChunk), ending the chunk
// only between ring tokens so that the next request can resume after
// the last token sent. A token's records go whole into a chunk, and one
// that would take a non-empty chunk past the limit waits for the next,
// so a chunk is at most the limit or one token's records (one key's,
// which Config.MaxValue keeps under the transport's message limit). The
// store holds everything this node acknowledged, since the loop persists
// before it answers.
func (n *Node) answerSync(m replica.Message) {
	limit := n.cfg.SyncChunk
	if m.Limit > 0 && m.Limit < uint64(limit) {
		limit = int(m.Limit)
	}
	counted := true
	for _, r := range n.Receiving() {
		counted = counted && !replica.Overlap(r, m.Range)
	}
	reply := replica.Message{Type: replica.MsgSyncChunk, From: n.self, To: m.From, Round: m.Round, Counted: counted, Cursor: m.Cursor, Done: true}
	if counted {
		size := 0
		// group holds the records of the token being read.
		var group []replica.Record
		groupSize := 0
		// take adds the group to the chunk if it fits, or if the chunk
		// is empty; it reports whether it did.
		take := func() bool {
			if len(group) == 0 {
				return true
			}
			if size > 0 && size+groupSize > limit {
				return false
			}
			reply.Records = append(reply.Records, group...)
			size += groupSize
			reply.Cursor = group[0].Key.Token()
			group, groupSize = group[:0], 0
			return true
		}
		err := n.store.Range(n.syncCtx, ring.Range{Start: m.Cursor, End: m.Range.End}, func(r replica.Record) bool {
			if len(group) > 0 && r.Key.Token() != group[0].Key.Token() {
				if !take() || size >= limit {
					reply.Done = false
					return false
				}
			}
			group = append(group, r)
			groupSize += recordSize(r)
			return true
		})
		if err != nil {
			n.log.Warn("a catch-up request could not be answered", "from", m.From.String(), "err", err)
			return
		}
		if reply.Done && !take() {
			reply.Done = false
		}
	}
	n.serving.answered(m, reply.Done)
	n.post(reply)
}

// syncServing tracks the catch-ups a node answers as a source, so that a
// leaving member can wait for those that read from it.
type syncServing struct {
	mu   sync.Mutex
	open map[syncSession]time.Time // when each last asked
	last time.Time
}

// syncSession is one requester's catch-up of one range.
type syncSession struct {
	from ring.NodeID
	rng  ring.Range
}

// answered notes a chunk sent to m's requester: its session is open
// until a chunk says done.
func (s *syncServing) answered(m replica.Message, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := syncSession{from: m.From, rng: m.Range}
	now := time.Now()
	if done {
		delete(s.open, k)
	} else {
		if s.open == nil {
			s.open = map[syncSession]time.Time{}
		}
		s.open[k] = now
	}
	s.last = now
}

// Serving returns how many catch-ups read from this node and have not
// been sent their last chunk, and when this node last answered one. A
// session whose requester stopped asking (it completed from other
// sources, was cancelled, or its range moved again) counts no more once
// it was silent for twice the time a live requester takes to ask again.
func (n *Node) Serving() (open int, last time.Time) {
	abandoned := 2 * syncRetryTicks * n.cfg.TickEvery
	n.serving.mu.Lock()
	defer n.serving.mu.Unlock()
	for k, at := range n.serving.open {
		if time.Since(at) > abandoned {
			delete(n.serving.open, k)
		}
	}
	return len(n.serving.open), n.serving.last
}

// recordSize is about what r takes in a chunk.
func recordSize(r replica.Record) int {
	return len(r.Key.Type) + len(r.Key.ID) + len(r.Name) + len(r.Value) + len(r.Epoch.Node.Addr) + 32
}

// pacer spaces catch-up requests so that what they bring stays under a
// byte rate: a chunk of b bytes received delays every later request by
// b/rate.
type pacer struct {
	rate int // bytes per second; negative: unlimited
	mu   sync.Mutex
	next time.Time
}

// charge accounts for a chunk of bytes received.
func (p *pacer) charge(bytes int) {
	if p.rate < 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(bytes) / float64(p.rate) * float64(time.Second)))
}

// wait returns once the chunks charged so far are within the rate.
func (p *pacer) wait(ctx context.Context) error {
	if p.rate < 0 {
		return nil
	}
	p.mu.Lock()
	d := time.Until(p.next)
	p.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
