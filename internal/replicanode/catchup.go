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
// One source, picked by rng's start (so that the ranges of one hand-off
// spread over their sources; the first by ID for the whole ring), is the
// value source:
// if this node holds nothing in rng it sends the records of rng in ring
// order, in chunks of at most Config.SyncChunk bytes (or one key's
// records); otherwise it sends an index of them (the records without
// their values, chunked the same way) and then the values of the records
// it holds newer than this node's. Every other source sends only an index,
// and the values of what it holds newer than this node once the value
// source delivered that part of the range, so with live sources each
// value crosses once. A value source that fails, or has to be asked
// again, no longer holds the others back. One request is in flight per
// source, at most Config.SyncRate bytes per second over all sources.
// Each record is kept if it is newer than the one held in its slot (a
// promise if it is newer than the one held), and a chunk counts only once
// it is persisted; the end of receiving rng is recorded in the store
// before CatchUp returns. A source still receiving part of rng itself
// fails with ErrSourceReceiving, one that does not send a record its
// index listed with ErrSourceIncomplete; a source that does not answer is
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

// CatchUpFromAll is CatchUp from every source, for a node that may have
// lost its last writes and reads every other member alive (the replicas
// of each key in rng are among them): all of them must deliver, and a
// source still receiving part of rng delivers what its store holds
// instead of failing with ErrSourceReceiving. None of them needs to be
// caught up itself: what a source still receives it copies from other
// members, which this node reads too, so the union of their stores
// already holds what any of them holds once caught up, and what any
// quorum acknowledged, unless every member of that quorum lost it. Two
// members that stopped uncleanly together so catch up from each other
// instead of waiting for each other for good. When every source itself
// receives the whole ring (a whole-cluster loss without Sync) the
// catch-up fails with ErrSourceReceiving: accepting that loss is the
// operator's decision (CountEverywhere).
func (n *Node) CatchUpFromAll(ctx context.Context, rng ring.Range, sources []ring.NodeID) error {
	sources = slices.Compact(slices.SortedFunc(slices.Values(sources), ring.NodeID.Compare))
	if err := n.copyRange(ctx, rng, sources, len(sources), copyPartial, nil); err != nil {
		return err
	}
	return n.call(ctx, &request{op: opReceived, ranges: []ring.Range{rng}})
}

// Copy is CatchUp without its end: the node keeps receiving rng, for a
// caller that ends receiving (EndReceiving) what no other catch-up of
// its own still covers.
func (n *Node) Copy(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int) error {
	return n.copyRange(ctx, rng, sources, quorum, copyPlain, nil)
}

// CopyFenced is Copy for a hand-off: before it reads rng from a source,
// it fences rng there (MsgFence, see replica.Fencer), so that an owner of
// the previous set acquired before the fence, whose view of membership
// may lag, gets no write acknowledged by quorum sources from then on;
// only fenced sources count toward quorum, each once its copy is done.
// An owner fenced so steps down and acquires again above the fence.
// departed names the members whose departure from the ring gave rng to
// this node (see replica.Fencer.Departing): the floors name them, and an
// owner whose view does not show them gone is refused too. A source
// still receiving part of rng fails the fencing with ErrSourceReceiving,
// as it fails a copy.
func (n *Node) CopyFenced(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int, departed []ring.NodeID) error {
	return n.copyRange(ctx, rng, sources, quorum, copyFenced, departed)
}

// copyMode says how a copy treats its sources.
type copyMode int

const (
	copyPlain   copyMode = iota // only sources that count deliver
	copyFenced                  // fenced first (CopyFenced)
	copyPartial                 // sources still receiving deliver what they hold (CatchUpFromAll)
)

func (n *Node) copyRange(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int, mode copyMode, departed []ring.NodeID) error {
	sources = slices.Clone(sources)
	slices.SortFunc(sources, ring.NodeID.Compare)
	sources = slices.Compact(sources)
	if slices.Contains(sources, n.self) {
		return fmt.Errorf("%w: %v", ErrCatchUpSource, n.self)
	}
	if quorum < 1 || quorum > len(sources) {
		return fmt.Errorf("%w: quorum %d of %d sources", ErrCatchUpQuorum, quorum, len(sources))
	}
	if mode == copyFenced {
		fenced, err := n.fence(ctx, rng, sources, quorum, departed)
		if err != nil {
			return err
		}
		sources = fenced
	}
	empty, err := n.holdsNothing(ctx, rng)
	if err != nil {
		return fmt.Errorf("troupe: catch-up of %v: %w", rng, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lead := newCopyLead(rng)
	results := make(chan error, len(sources))
	copies := make([]*copySource, len(sources))
	var wg sync.WaitGroup
	// The ranges of a hand-off share their previous sets: a value source
	// picked by the range spreads the values they send over the sources,
	// each answering one request at a time, instead of one serving them all.
	leader := int(uint64(rng.Start) % uint64(len(sources)))
	for i, src := range sources {
		s := &copySource{n: n, rng: rng, src: src, lead: lead, leads: i == leader, full: i == leader && empty, partial: mode == copyPartial}
		if quorum == len(sources) {
			s.reads = sources // the copy reads them all (see replica.Message.Reads)
		}
		copies[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.run(sctx)
			if s.leads {
				lead.release()
			}
			results <- err
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
	if mode == copyPartial && !slices.ContainsFunc(copies, func(s *copySource) bool { return !s.recovering }) {
		// Every member recovers: the loss of writes that all the members
		// of their quorums lost would go unnoticed (a whole-cluster power
		// loss without Sync). That is the operator's call
		// (CountEverywhere).
		return fmt.Errorf("%w: catch-up of %v: every source receives the whole ring too", ErrSourceReceiving, rng)
	}
	return nil
}

// holdsNothing reports whether this node's store holds no record in rng:
// its catch-up asks for whole records at once, without an index first.
func (n *Node) holdsNothing(ctx context.Context, rng ring.Range) (bool, error) {
	empty := true
	err := n.store.Range(ctx, rng, func(replica.Record) bool {
		empty = false
		return false
	})
	return empty, err
}

// fence fences rng at sources until quorum of them are fenced (see
// replica.Fencer) and returns those. A fencing round is sent again to the
// sources that did not answer it every syncRetryTicks tick periods.
func (n *Node) fence(ctx context.Context, rng ring.Range, sources []ring.NodeID, quorum int, departed []ring.NodeID) ([]ring.NodeID, error) {
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
	f := replica.NewFencer(n.self, id, rng, sources, quorum, known.term).Departing(departed)
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

// Awaiting records the sources the hand-off job receiving rng waits on (its
// previous replicas still alive), or forgets rng when sources is nil. A
// node that receives part of a range waits for it on others, so it
// answers another node's catch-up and fence of it as not counting;
// except when every part it receives waits on that node alone (the
// others of its previous set gone): what it holds is then all it will
// ever give that node, which would otherwise wait on it in turn, for
// good. It answers that one (Message.Cycle), and one that reads every
// other source it waits on too (Message.Reads).
// job names the hand-off among those of the same range (a type's).
func (n *Node) Awaiting(job string, rng ring.Range, sources []ring.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := awaitKey{job, rng}
	if sources == nil {
		delete(n.awaits, k)
		return
	}
	if n.awaits == nil {
		n.awaits = map[awaitKey][]ring.NodeID{}
	}
	n.awaits[k] = slices.Clone(sources)
}

// awaitKey names a hand-off's wait (see Awaiting).
type awaitKey struct {
	job string
	rng ring.Range
}

// waitsOnlyOnLocked reports whether every part of rng this node receives
// waits on from alone, or on from and sources it reads too (reads: see
// replica.Message.Reads): recorded by Awaiting with no other source. n.mu
// is held.
func (n *Node) waitsOnlyOnLocked(rng ring.Range, from ring.NodeID, reads []ring.NodeID) bool {
	if n.lostLocked(rng) {
		return false // what it holds there stands for nothing
	}
	inside := replica.Intersect(n.receiving, rng)
	if len(inside) == 0 {
		return false // it counts: nothing to excuse
	}
	var alone []ring.Range
	for k, srcs := range n.awaits {
		only := len(srcs) > 0 && !slices.ContainsFunc(srcs, func(s ring.NodeID) bool { return s != from && !slices.Contains(reads, s) })
		overlaps := slices.ContainsFunc(inside, func(x ring.Range) bool { return replica.Overlap(x, k.rng) })
		switch {
		case !overlaps:
		case only:
			alone = append(alone, k.rng)
		default:
			return false
		}
	}
	return len(replica.Subtract(inside, alone...)) == 0
}

// lostLocked reports whether this node's store may lack what it
// acknowledged in part of rng (see Node.lost). n.mu is held.
func (n *Node) lostLocked(rng ring.Range) bool {
	return slices.ContainsFunc(n.lost, func(g ring.Range) bool { return replica.Overlap(g, rng) })
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

// ReceivedBytes returns the bytes of catch-up chunks and indexes this node
// received.
func (n *Node) ReceivedBytes() int64 { return n.synced.Load() }

// copySource is one source's part of a Copy.
type copySource struct {
	n     *Node
	rng   ring.Range
	src   ring.NodeID
	lead  *copyLead
	leads bool // the value source
	full  bool // ask for whole records, not an index
	// partial asks a source still receiving rng for what it holds;
	// recovering notes that the source said it receives the whole ring.
	partial    bool
	recovering bool
	// reads, when the copy needs every source, lists them for the
	// source (see replica.Message.Reads).
	reads []ring.NodeID
	retry *time.Timer
}

// run copies rng from the source, a chunk (and the values its index
// lacks) at a time, until the source says done.
func (s *copySource) run(ctx context.Context) error {
	s.retry = time.NewTimer(time.Hour)
	defer s.retry.Stop()
	typ, want := replica.MsgSyncIndexRequest, replica.MsgSyncIndex
	if s.full {
		typ, want = replica.MsgSyncRequest, replica.MsgSyncChunk
	}
	cursor := s.rng.Start
	for {
		c, err := s.ask(ctx, replica.Message{Type: typ, Range: s.rng, Cursor: cursor}, want)
		if err != nil {
			return err
		}
		recs := c.Records
		if !s.full {
			if recs, err = s.resolve(ctx, cursor, c); err != nil {
				return err
			}
		}
		if err := s.n.keep(ctx, recs); err != nil {
			return err
		}
		if s.leads && !c.Done {
			s.lead.advance(c.Cursor)
		}
		if c.Done {
			return nil
		}
		cursor = c.Cursor
	}
}

// keep has the loop keep recs, returning once they are persisted.
func (n *Node) keep(ctx context.Context, recs []replica.Record) error {
	if len(recs) == 0 {
		return nil
	}
	return n.call(ctx, &request{op: opSync, records: recs})
}

// resolve takes an index chunk asked for after cursor: it returns the
// records to keep as listed (promises and tombstones newer than this
// node's), having fetched and persisted the values of those the source
// holds newer than this node. A source other than the value source first
// waits for the value source to deliver the part of the range they lie
// in, which it is likely to send too.
func (s *copySource) resolve(ctx context.Context, cursor ring.Token, idx replica.Message) ([]replica.Record, error) {
	keep, want, err := s.n.missing(ctx, idx.Records)
	if err != nil || len(want) == 0 {
		return keep, err
	}
	if !s.leads {
		if err := s.lead.wait(ctx, s.n.done, want[len(want)-1].Key.Token()); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, s.n.closedErr()
			}
			return nil, err
		}
		var more []replica.Record
		if more, want, err = s.n.missing(ctx, want); err != nil {
			return nil, err
		}
		keep = append(keep, more...)
	}
	return keep, s.fetch(ctx, cursor, want, idx.Done)
}

// missing splits indexed records into those newer than this node's that
// are whole as listed (promises, tombstones), to keep, and those newer
// whose values are to be fetched.
func (n *Node) missing(ctx context.Context, listed []replica.Record) (keep, want []replica.Record, err error) {
	err = n.store.Held(ctx, listed, func(i int, held replica.Record, ok bool) {
		r := listed[i]
		switch {
		case ok && !newerRecord(r, held):
		case r.Kind == replica.KindPromise || r.Tombstone:
			keep = append(keep, r)
		default:
			want = append(want, r)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return keep, want, nil
}

// newerRecord reports whether r was written after o (for promises: r
// promises a newer epoch).
func newerRecord(r, o replica.Record) bool {
	if r.Kind == replica.KindPromise {
		// Or it names a newer horizon.
		rh, _ := replica.HorizonOf(r)
		oh, _ := replica.HorizonOf(o)
		return r.Epoch.Compare(o.Epoch) > 0 || rh.After(oh)
	}
	if c := r.Epoch.Compare(o.Epoch); c != 0 {
		return c > 0
	}
	return r.Version > o.Version
}

// fetch asks the source for the records of want, listed by its index
// after cursor, and persists them as they come: a chunk of at most the
// limit at a time, resuming after the last token sent. last says the
// index was done, so that the source ends its session with the last
// chunk. Each must come at least as new as listed: records are replaced
// only by newer ones.
func (s *copySource) fetch(ctx context.Context, cursor ring.Token, want []replica.Record, last bool) error {
	type slotOf struct {
		key  replica.Key
		slot replica.Slot
	}
	pending := make(map[slotOf]replica.Record, len(want))
	slots := make([]replica.Record, len(want))
	for i, r := range want {
		pending[slotOf{r.Key, r.Slot()}] = r
		slots[i] = replica.Record{Key: r.Key, Kind: r.Kind, Name: r.Name}
	}
	for len(slots) > 0 {
		c, err := s.ask(ctx, replica.Message{Type: replica.MsgSyncRequest, Range: s.rng, Cursor: cursor, Records: slots, Done: last}, replica.MsgSyncChunk)
		if err != nil {
			return err
		}
		if err := s.n.keep(ctx, c.Records); err != nil {
			return err
		}
		for _, r := range c.Records {
			k := slotOf{r.Key, r.Slot()}
			if listed, ok := pending[k]; ok && !newerRecord(listed, r) {
				delete(pending, k)
			}
		}
		if c.Done {
			break
		}
		cursor = c.Cursor
		after := ring.Range{Start: cursor, End: s.rng.End}
		slots = slices.DeleteFunc(slots, func(r replica.Record) bool { return !after.Contains(r.Key.Token()) })
	}
	if len(pending) > 0 {
		return fmt.Errorf("%w: %v for %v: %d of %d records", ErrSourceIncomplete, s.src, s.rng, len(pending), len(want))
	}
	return nil
}

// ask sends req to the source, after the pacing of the chunks before it,
// and waits for its answer of type want, asking again every
// syncRetryTicks tick periods; the value source that has to ask again
// releases the others.
func (s *copySource) ask(ctx context.Context, req replica.Message, want replica.MsgType) (replica.Message, error) {
	n := s.n
	// Every request waits for the budget of the chunks before it, the
	// first of a session included: a join copies hundreds of ranges,
	// most of them one chunk.
	if err := n.pace.wait(ctx); err != nil {
		return replica.Message{}, err
	}
	id := n.syncID.Add(1)
	w := &syncWait{from: s.src, chunk: make(chan chunk, 1)}
	n.mu.Lock()
	n.syncs[id] = w
	n.mu.Unlock()
	req.From, req.To, req.Round, req.Limit, req.Partial, req.Reads = n.self, s.src, id, uint64(n.cfg.SyncChunk), s.partial, s.reads
	c, err := s.await(ctx, req, w)
	n.mu.Lock()
	delete(n.syncs, id)
	n.mu.Unlock()
	if err != nil {
		return replica.Message{}, err
	}
	// A source that does not count sends what it holds only when that
	// does: it waits on this node and sources this node reads (Cycle),
	// or, to a partial copy, it lost its last writes (Recovering).
	if !c.msg.Counted && !c.msg.Cycle && !(s.partial && c.msg.Recovering) {
		return replica.Message{}, fmt.Errorf("%w: %v for %v", ErrSourceReceiving, s.src, s.rng)
	}
	s.recovering = s.recovering || c.msg.Recovering
	n.synced.Add(int64(c.size))
	n.pace.charge(c.size)
	if c.msg.Type != want {
		return replica.Message{}, fmt.Errorf("troupe: catch-up of %v: %v answered a %v with a %v", s.rng, s.src, req.Type, c.msg.Type)
	}
	return c.msg, nil
}

// await sends req and waits for its chunk, asking again every
// syncRetryTicks tick periods.
func (s *copySource) await(ctx context.Context, req replica.Message, w *syncWait) (chunk, error) {
	n := s.n
	for {
		n.post(req)
		s.retry.Reset(syncRetryTicks * n.cfg.TickEvery)
		select {
		case c := <-w.chunk:
			return c, nil
		case <-s.retry.C:
			if s.leads {
				s.lead.release()
			}
		case <-ctx.Done():
			return chunk{}, ctx.Err()
		case <-n.done:
			return chunk{}, n.closedErr()
		}
	}
}

// copyLead is how far a Copy's value source has delivered its range, for
// the other sources to fetch only what it did not send.
type copyLead struct {
	start ring.Token // the range's start
	mu    sync.Mutex
	// through is the offset from start of the last token delivered,
	// once begun.
	through  uint64
	begun    bool
	released bool          // the others wait no more
	moved    chan struct{} // closed at every change
}

func newCopyLead(rng ring.Range) *copyLead {
	return &copyLead{start: rng.Start, moved: make(chan struct{})}
}

// offset is t's place in ring order after start: the range's first token
// is 0, and its end (start itself, for the whole ring) the largest.
func (l *copyLead) offset(t ring.Token) uint64 { return uint64(t - l.start - 1) }

// advance notes that the value source delivered through t.
func (l *copyLead) advance(t ring.Token) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o := l.offset(t); !l.begun || o > l.through {
		l.through, l.begun = o, true
		if !l.released { // released, nobody waits on moved again
			close(l.moved)
			l.moved = make(chan struct{})
		}
	}
}

// release lets the others go on without waiting: the value source is
// done, failed, or did not answer in time.
func (l *copyLead) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.released {
		l.released = true
		close(l.moved)
	}
}

// wait returns once the value source delivered through t or was
// released.
func (l *copyLead) wait(ctx context.Context, closed <-chan struct{}, t ring.Token) error {
	for {
		l.mu.Lock()
		ok := l.released || (l.begun && l.through >= l.offset(t))
		moved := l.moved
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		case <-closed:
			return ErrClosed
		}
	}
}

// post sends one message in an envelope of its own, from any goroutine.
func (n *Node) post(m replica.Message) {
	enc := replica.AppendEncode(make([]byte, 0, replica.EncodedLenBound(m)), m)
	buf := n.ep.Buffer(len(enc) + 2*10 + 1)
	buf = appendEnvelope(buf, enc, []int{len(enc)})
	if err := n.ep.Post(m.To, transport.StreamReplication, 0, buf); err != nil {
		// A request is asked again; a chunk that cannot be posted (too
		// large for the transport, say) stalls its catch-up, which the
		// operator must see.
		level := slog.LevelDebug
		if m.Type == replica.MsgSyncChunk || m.Type == replica.MsgSyncIndex {
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

// answerSync answers a catch-up request with the records of its range
// after its cursor, in ring order, up to its limit (and this node's
// SyncChunk): whole records for a sync-request, records without their
// values for an index request, and for a sync-request that names slots
// (a fetch) the records of those slots only. A chunk ends only between
// ring tokens, so that the next request can resume after the last token
// sent. The store holds everything this node acknowledged, since the
// loop persists before it answers. A node still receiving part of the
// range answers that it does not count, without records, unless the
// request is partial (see CatchUpFromAll) or the node waits for the
// range on the requester alone (see Awaiting).
func (n *Node) answerSync(m replica.Message) {
	limit := n.cfg.SyncChunk
	if m.Limit > 0 && m.Limit < uint64(limit) {
		limit = int(m.Limit)
	}
	counted := true
	n.mu.Lock()
	receiving := slices.Clone(n.receiving)
	cycle := n.waitsOnlyOnLocked(m.Range, m.From, m.Reads)
	lost := n.lostLocked(m.Range)
	n.mu.Unlock()
	for _, r := range receiving {
		counted = counted && !replica.Overlap(r, m.Range)
	}
	typ := replica.MsgSyncChunk
	if m.Type == replica.MsgSyncIndexRequest {
		typ = replica.MsgSyncIndex
	}
	reply := replica.Message{Type: typ, From: n.self, To: m.From, Round: m.Round, Counted: counted, Cycle: !counted && cycle, Cursor: m.Cursor, Done: true}
	// To a partial request (CatchUpFromAll) a node that may have lost its
	// last writes there sends what it holds, saying so; one that receives
	// the range at a hand-off sends it only as it would to a copier it
	// waits on (Cycle): what it will still receive may come from members
	// the requester does not read (a member leaving).
	partial := m.Partial && (lost || cycle)
	reply.Recovering = m.Partial && lost
	fetch := m.Type == replica.MsgSyncRequest && len(m.Records) > 0
	if counted || partial || reply.Cycle {
		b := chunkBuilder{reply: &reply, limit: limit, index: typ == replica.MsgSyncIndex}
		after := ring.Range{Start: m.Cursor, End: m.Range.End}
		var err error
		if fetch {
			for _, w := range m.Records {
				t := w.Key.Token()
				if w.Kind == replica.KindPromise || !after.Contains(t) || !m.Range.Contains(t) {
					continue
				}
				r, ok, gerr := n.store.Get(n.syncCtx, w.Key, w.Slot())
				if err = gerr; err != nil {
					break
				}
				if ok && !b.add(r) {
					break
				}
			}
		} else {
			err = n.store.Range(n.syncCtx, after, b.add)
		}
		if err != nil {
			n.log.Warn("a catch-up request could not be answered", "from", m.From.String(), "err", err)
			return
		}
		b.finish()
	}
	// A fetch ends its session only if the index it follows was done.
	n.serving.answered(m, reply.Done && (!fetch || m.Done))
	n.post(reply)
}

// chunkBuilder fills a chunk with the records it is given, in ring order,
// up to a byte limit. A token's records go whole into a chunk, and one
// that would take a non-empty chunk past the limit waits for the next,
// so a chunk is at most the limit or one token's records (one key's,
// which Config.MaxValue keeps under the transport's message limit).
type chunkBuilder struct {
	reply *replica.Message
	limit int
	index bool // without values
	size  int
	// group holds the records of the token being read.
	group     []replica.Record
	groupSize int
}

// add adds r to the token being read, after moving the previous token's
// records to the chunk; it returns false, not taking r, once the chunk
// is full.
func (b *chunkBuilder) add(r replica.Record) bool {
	if len(b.group) > 0 && r.Key.Token() != b.group[0].Key.Token() {
		if !b.take() || b.size >= b.limit {
			b.reply.Done = false
			return false
		}
	}
	if b.index && !r.Tombstone && r.Kind != replica.KindPromise {
		// A promise (its horizon) and a tombstone (its date) are
		// whole as listed.
		r.Value = nil
	}
	b.group = append(b.group, r)
	b.groupSize += recordSize(r)
	return true
}

// take adds the group to the chunk if it fits, or if the chunk is empty;
// it reports whether it did.
func (b *chunkBuilder) take() bool {
	if len(b.group) == 0 {
		return true
	}
	if b.size > 0 && b.size+b.groupSize > b.limit {
		return false
	}
	b.reply.Records = append(b.reply.Records, b.group...)
	b.size += b.groupSize
	b.reply.Cursor = b.group[0].Key.Token()
	b.group, b.groupSize = b.group[:0], 0
	return true
}

// finish ends the chunk after the last record given.
func (b *chunkBuilder) finish() {
	if b.reply.Done && !b.take() {
		b.reply.Done = false
	}
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
