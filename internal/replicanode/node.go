package replicanode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// Node drives one node's replication core: it feeds the core the
// messages that arrive on the replication stream, the callers' requests
// and a tick, and after each batch of them persists what the core asks,
// then sends its messages, then releases or fails the callers that
// waited. One goroutine owns the core; every method is safe for
// concurrent use.
type Node struct {
	synced   atomic.Int64 // bytes of catch-up chunks received
	serving  syncServing  // catch-ups this node answers as a source
	cfg      Config
	ep       transport.Endpoint
	self     ring.NodeID
	store    replicastore.Store
	ownStore bool
	log      *slog.Logger

	mu     sync.Mutex
	queue  []input
	spare  []input
	closed bool
	// err is why the loop stopped: ErrClosed, or a store failure.
	err  error
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// decoded holds slices (*[]replica.Message) that arriving envelopes
	// are decoded into, for the transport's readers to share.
	decoded sync.Pool
	// receiving mirrors the core's ranges still being received.
	receiving []ring.Range
	// syncs holds the catch-up requests waiting for their chunk, by id.
	syncs map[uint64]*syncWait
	// fences holds the fencings waiting for their answers, by id.
	fences map[uint64]chan replica.Message
	// awaits holds, per range this node's hand-offs receive, the sources
	// they wait on (Awaiting).
	awaits map[awaitKey][]ring.NodeID
	// lost holds the ranges where this node's store may lack what it
	// acknowledged (it stopped uncleanly, or joined empty) and that it
	// still receives: what it holds there stands for nothing.
	lost []ring.Range

	syncID atomic.Uint64
	// syncReqs queues the catch-up requests this node answers as a
	// source, on the goroutine that reads them from the store.
	syncReqs chan replica.Message
	// syncCtx ends when the loop stops: the source stops reading.
	syncCtx  context.Context
	syncStop context.CancelFunc
	syncDone chan struct{}
	pace     pacer

	// Owned by the loop goroutine.
	core      *replica.Core
	waiters   map[replica.Ticket]*waiter
	acquiring map[replica.Key][]*waiter
	// collecting holds the callers of Collect waiting for their key's
	// sweep to end.
	collecting map[replica.Key][]*waiter
	scratch    []byte
	ends       []int
	// receivingChanged: the core's receiving ranges changed in this
	// batch and must be recorded before anything leaves.
	receivingChanged bool
	// out gathers a batch's records to persist and messages to send;
	// answers, what its waiters are told once both are done.
	out     replica.Ready
	answers []answer
}

type answer struct {
	w   *waiter
	err error
}

// input is one thing for the loop: a message from a peer or a request.
type input struct {
	msg replica.Message
	req *request
}

type opKind uint8

const (
	opAcquire opKind = iota + 1
	opWrite
	opRead
	opResign
	opAbandon
	opReceiving
	opCountEverywhere
	opSync
	opReceived
	opHighestTerm
	opCollect
)

type request struct {
	op        opKind
	key       replica.Key
	slot      replica.Slot
	value     []byte
	tombstone bool
	replicas  []ring.NodeID
	previous  []ring.NodeID
	copiers   []ring.NodeID
	gone      []ring.NodeID
	view      replica.View
	level     replication.Level
	ranges    []ring.Range
	records   []replica.Record
	w         *waiter
	// abandoned is the op of the request an opAbandon gives up on.
	abandoned opKind
	// term is opHighestTerm's answer, set before the waiter is answered.
	term uint64
	// before is opCollect's: tombstones dated after it are kept.
	before time.Time
}

// waiter is a caller waiting for its ticket or acquisition: on done, or
// (WriteAsync) through cb, called on the loop goroutine.
type waiter struct {
	key    replica.Key
	ticket replica.Ticket
	view   map[replica.Slot]replica.Record
	// collected is Collect's answer, set before the waiter is answered.
	collected bool
	done      chan error // buffered: the loop never blocks on it
	cb        func(error)
}

// finish answers w once.
func (w *waiter) finish(err error) {
	if w.cb != nil {
		w.cb(err)
		return
	}
	w.done <- err
}

// Open restores a node from its store and starts it. A store that cannot
// be opened or read fails Open with the store's typed error
// (replication.ErrCorrupt, a *replication.FormatError matching
// replication.ErrNewerFormat), wrapped; nothing is reset.
//
// The node counts toward quorums at once, except on the ranges its store
// records as still receiving (a previous run that had not caught up
// them), and on the whole ring when it may lack what it acknowledged: its
// store reports an unclean stop (a Badger store stopped without Close
// while it ran without Sync, and the machine restarted since or its boot
// is unknown, so a power loss may have taken its last writes and
// promises), or Config.Joining is set and its store holds no
// records and never recorded receiving anything. It is decided, and
// recorded in the store, before the node takes any message; CatchUp ends
// it.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	self := cfg.Endpoint.Self()
	n := &Node{
		cfg:        cfg,
		ep:         cfg.Endpoint,
		self:       self,
		store:      cfg.Store,
		log:        cfg.Logger.With("component", "replication", "node", self.String()),
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		syncs:      make(map[uint64]*syncWait),
		fences:     make(map[uint64]chan replica.Message),
		syncReqs:   make(chan replica.Message, syncQueue),
		syncDone:   make(chan struct{}),
		pace:       pacer{rate: cfg.SyncRate},
		waiters:    make(map[replica.Ticket]*waiter),
		acquiring:  make(map[replica.Key][]*waiter),
		collecting: make(map[replica.Key][]*waiter),
	}
	if n.store == nil {
		if dir := cfg.Replication.DataDir; dir != "" {
			b, err := replicastore.Open(dir, replicastore.Options{Sync: cfg.Replication.Sync, Logger: cfg.Logger})
			if err != nil {
				return nil, fmt.Errorf("troupe: replication node %v: %w", self, err)
			}
			n.store = b
		} else {
			n.store = replicastore.NewMemory()
		}
		n.ownStore = true
	}
	fail := func(what string, err error) (*Node, error) {
		if n.ownStore {
			_ = n.store.Close()
		}
		return nil, fmt.Errorf("troupe: replication node %v: %s: %w", self, what, err)
	}
	var recs []replica.Record
	err := n.store.Range(ctx, ring.Range{}, func(r replica.Record) bool {
		recs = append(recs, r)
		return true
	})
	if err != nil {
		return fail("restore", err)
	}
	stored, recorded, err := n.store.Receiving(ctx)
	if err != nil {
		return fail("restore", err)
	}
	floors, err := n.store.Floors(ctx)
	if err != nil {
		return fail("restore", err)
	}
	n.core = replica.New(self, replica.Counting)
	n.core.SetDeltaMin(cfg.DeltaMin)
	n.core.AddReceiving(stored...)
	if u, ok := n.store.(interface{ Unclean() bool }); ok && u.Unclean() {
		n.log.Warn("the store was not closed cleanly, ran without Sync and the machine may have restarted since: it may have lost acknowledged writes and promises, so this node receives the whole ring and does not count until it caught up")
		n.core.AddReceiving(ring.Range{})
	} else if cfg.Joining && len(recs) == 0 && !recorded {
		n.log.Info("joining with an empty store: this node receives the whole ring and does not count until it caught up")
		n.core.AddReceiving(ring.Range{})
	} else if len(stored) > 0 {
		n.log.Info("this node had not caught up when it stopped: it still receives what it did not catch up", "ranges", fmt.Sprint(stored))
	}
	n.core.Restore(recs...)
	n.core.RestoreFloors(floors...)
	n.receiving = n.core.Receiving()
	if len(n.receiving) == 1 && n.receiving[0].Start == n.receiving[0].End {
		n.lost = n.receiving
	}
	// What the node receives is recorded before its first answer, so a
	// restart before its catch-up ends still receives.
	if !slices.Equal(n.receiving, stored) {
		if err := n.store.SetReceiving(ctx, n.receiving); err != nil {
			return fail("record receiving", err)
		}
	}
	n.syncCtx, n.syncStop = context.WithCancel(context.Background())
	// The start is decided before the first message can arrive.
	n.ep.Handle(transport.StreamReplication, transport.HandlerFunc(n.receive))
	go n.serveSyncs()
	var tick <-chan time.Time
	var stopTicker func()
	if cfg.ticks == nil {
		t := time.NewTicker(cfg.TickEvery)
		tick, stopTicker = t.C, t.Stop
	}
	go n.run(tick, stopTicker)
	return n, nil
}

// Self returns the node's identity.
func (n *Node) Self() ring.NodeID { return n.self }

// receive takes an envelope off the replication stream.
func (n *Node) receive(from ring.NodeID, payload []byte) {
	// The decoded messages are copied into the queue below: their slice
	// goes back to the pool.
	bp, _ := n.decoded.Get().(*[]replica.Message)
	if bp == nil {
		bp = new([]replica.Message)
	}
	msgs, err := appendEnvelopeMessages((*bp)[:0], payload)
	defer func() {
		clear(msgs[:cap(msgs)])
		*bp = msgs[:0]
		n.decoded.Put(bp)
	}()
	n.ep.Release(payload)
	if err != nil {
		n.log.Warn("dropped a replication envelope", "from", from.String(), "err", err)
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	for _, m := range msgs {
		// The transport authenticates the sender; a message claiming
		// another is dropped.
		if m.From != from || m.To != n.self {
			continue
		}
		switch m.Type {
		case replica.MsgSyncChunk, replica.MsgSyncIndex:
			if w := n.syncs[m.Round]; w != nil && w.from == from {
				select {
				case w.chunk <- chunk{msg: m, size: len(payload)}:
				default: // a duplicate
				}
			}
		case replica.MsgSyncRequest, replica.MsgSyncIndexRequest:
			select {
			case n.syncReqs <- m:
			default:
				// The requester asks again later.
			}
		case replica.MsgFence:
			m.Cycle = n.waitsOnlyOnLocked(m.Range, m.From, m.Reads)
			n.queue = append(n.queue, input{msg: m})
		case replica.MsgFenced:
			if ch := n.fences[m.Round]; ch != nil {
				select {
				case ch <- m:
				default: // the fencing sends its round again
				}
			}
		default:
			n.queue = append(n.queue, input{msg: m})
		}
	}
	n.mu.Unlock()
	n.signal()
}

func (n *Node) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Node) enqueue(in ...input) bool {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return false
	}
	n.queue = append(n.queue, in...)
	n.mu.Unlock()
	n.signal()
	return true
}

// closedErr returns why the node no longer takes requests.
func (n *Node) closedErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return n.err
	}
	return ErrClosed
}

// Err returns nil while the node takes requests, and why it stopped once
// it has: ErrClosed after Close, or the error that ended its loop (a
// store that failed).
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case !n.closed:
		return nil
	case n.err != nil:
		return n.err
	}
	return ErrClosed
}

// call hands a request to the loop and waits for its answer.
func (n *Node) call(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return unavailable(r, err)
	}
	r.w = &waiter{key: r.key, done: make(chan error, 1)}
	if !n.enqueue(input{req: r}) {
		return n.closedErr()
	}
	select {
	case err := <-r.w.done:
		return err
	case <-ctx.Done():
		// The loop forgets the waiter; what it asked for goes on (a write
		// still reaches the replicas it can), so its outcome is unknown.
		n.enqueue(input{req: &request{op: opAbandon, key: r.key, w: r.w, abandoned: r.op}})
		select {
		case err := <-r.w.done:
			// Answered meanwhile: the answer stands.
			return err
		default:
		}
		return unavailable(r, ctx.Err())
	case <-n.done:
		select {
		case err := <-r.w.done:
			return err
		default:
		}
		return n.closedErr()
	}
}

func unavailable(r *request, cause error) error {
	what := "read"
	switch {
	case r.op == opAcquire:
		what = "acquire"
	case r.op == opSync || r.op == opReceived || r.op == opHighestTerm:
		return fmt.Errorf("%w: catch-up: %w", ErrUnavailable, cause)
	case r.op == opWrite && r.tombstone:
		return fmt.Errorf("%w: delete %s/%s (it may or may not have happened): %w", ErrUnavailable, r.key.Type, r.key.ID, cause)
	case r.op == opWrite:
		return fmt.Errorf("%w: write %s/%s (it may or may not have happened): %w", ErrUnavailable, r.key.Type, r.key.ID, cause)
	}
	return fmt.Errorf("%w: %s %s/%s: %w", ErrUnavailable, what, r.key.Type, r.key.ID, cause)
}

// Acquire makes this node the owner of k: it raises k's ownership epoch
// on replicas (which must include this node; the runtime computes them
// with ring.AppendReplicas from the full ring, dead members included),
// adopts the newest records a quorum of level holds and writes them back,
// and returns once k is served here. A key already served over the same
// set returns at once; one held over another set is resigned (what waited
// on it fails with ErrResigned) and acquired again over replicas. If ctx ends first the
// acquisition is abandoned (the key resigned) and the error matches
// ErrUnavailable; a newer owner's refusal gives a *StaleOwnerError, and
// so does the floor of a hand-off whose copier is neither in replicas
// nor named, or whose departures are neither named nor shown by
// replicas (AcquireWith), with Floor set.
func (n *Node) Acquire(ctx context.Context, k replica.Key, replicas []ring.NodeID, level replication.Level) error {
	return n.call(ctx, &request{op: opAcquire, key: k, replicas: slices.Clone(replicas), level: level})
}

// AcquireFrom is Acquire after k's replica set changed from previous to
// replicas (a member joined or left, and placement moved k): when
// previous is not empty and differs, the acquisition needs promises from
// a quorum of each set (a member of both counts for both), adopts the
// newest records over all of them and writes them back to replicas only.
// An owner still writing to the previous set is fenced, and whatever it
// had acknowledged is adopted. A key this node already serves returns at
// once only if it was acquired over replicas by a joint acquisition from
// previous; served otherwise (over previous, say), it is resigned and
// acquired jointly. Name the previous set in every acquisition of k until
// one that named it returned; from then replicas alone will do.
func (n *Node) AcquireFrom(ctx context.Context, k replica.Key, replicas, previous []ring.NodeID, level replication.Level) error {
	return n.AcquireWith(ctx, k, replicas, level, AcquireOptions{Previous: previous})
}

// AcquireOptions are the optional parts of an acquisition.
type AcquireOptions struct {
	// Previous is the key's set before its latest change (see
	// AcquireFrom).
	Previous []ring.NodeID
	// Copiers are members whose hand-offs the caller's view shows (see
	// replica.AcquireOptions.Copiers): a floor that names one of them
	// does not make the acquisition fail with a StaleOwnerError whose
	// Floor is set.
	Copiers []ring.NodeID
	// Gone are members the caller's view shows gone from the key's ring
	// (see replica.AcquireOptions.Gone): a floor that names only such
	// departures does not make the acquisition fail with a
	// StaleOwnerError whose Floor is set.
	Gone []ring.NodeID
	// View is what the caller's view showed when it chose the sets (see
	// replica.AcquireOptions.View): a floor's copiers and departures it
	// shows count as named.
	View replica.View
}

// AcquireWith is Acquire with options: AcquireFrom's previous set, and
// the copiers and departures whose floors the acquisition may pass.
func (n *Node) AcquireWith(ctx context.Context, k replica.Key, replicas []ring.NodeID, level replication.Level, opts AcquireOptions) error {
	return n.call(ctx, &request{op: opAcquire, key: k, replicas: slices.Clone(replicas), previous: slices.Clone(opts.Previous),
		copiers: slices.Clone(opts.Copiers), gone: slices.Clone(opts.Gone), view: opts.View, level: level})
}

// Write replaces k's record in slot with value on a served key and
// returns once it, and every write made before it here, met the key's
// level. value is copied. A write that fails with ErrUnavailable,
// ErrStaleOwner or ErrResigned may or may not have happened, except one
// refused with ErrTooManyWrites (Config.MaxWritesInFlight); one on a key
// not served here fails with replica.ErrNotServing, and one larger than
// Config.MaxValue with ErrValueTooLarge: neither happened.
func (n *Node) Write(ctx context.Context, k replica.Key, slot replica.Slot, value []byte) error {
	if err := n.checkSize(k, slot, value); err != nil {
		return err
	}
	return n.call(ctx, &request{op: opWrite, key: k, slot: slot, value: slices.Clone(value)})
}

// checkSize refuses a write the transport could not carry.
func (n *Node) checkSize(k replica.Key, slot replica.Slot, value []byte) error {
	if size := len(k.Type) + len(k.ID) + len(slot.Name) + len(value); size > n.cfg.MaxValue {
		return fmt.Errorf("%w: %s/%s: %d bytes, limit %d", ErrValueTooLarge, k.Type, k.ID, size, n.cfg.MaxValue)
	}
	return nil
}

// WriteAsync is Write without waiting: it queues the write and returns.
// done is called exactly once, on the node's loop goroutine, with what
// Write would have returned: nil once the write and every earlier one of
// k met the level, or the error (ErrStaleOwner, ErrResigned,
// ErrTooManyWrites, replica.ErrNotServing, ErrClosed, a store failure).
// done must not block or call the node: the loop waits for it. A write
// refused at once (ErrValueTooLarge, or a closed node) returns the error
// and never calls done. Without a context, the caller that stops waiting
// at a deadline treats the write as one whose outcome is unknown.
// Unlike Write's, value is not copied: the node keeps it, and the caller
// must not change it after the call (the runtime hands over a record it
// encoded for the write alone).
func (n *Node) WriteAsync(k replica.Key, slot replica.Slot, value []byte, done func(error)) error {
	if err := n.checkSize(k, slot, value); err != nil {
		return err
	}
	// One allocation for the request and its waiter.
	rw := &struct {
		r request
		w waiter
	}{r: request{op: opWrite, key: k, slot: slot, value: value}, w: waiter{key: k, cb: done}}
	r := &rw.r
	r.w = &rw.w
	if !n.enqueue(input{req: r}) {
		return n.closedErr()
	}
	return nil
}

// Delete writes a tombstone in k's slot: a stale replica's older record
// cannot bring the value back. It waits and fails as Write.
func (n *Node) Delete(ctx context.Context, k replica.Key, slot replica.Slot) error {
	if err := n.checkSize(k, slot, nil); err != nil {
		return err
	}
	return n.call(ctx, &request{op: opWrite, key: k, slot: slot, tombstone: true})
}

// Read returns k's records as its owner sees them (every slot, tombstones
// included), once what they reflect met the level and a quorum confirmed,
// after the read arrived, that this node still holds k's epoch: a fenced
// owner never answers with stale records. It fails as Write does.
func (n *Node) Read(ctx context.Context, k replica.Key) (map[replica.Slot]replica.Record, error) {
	r := &request{op: opRead, key: k}
	if err := n.call(ctx, r); err != nil {
		return nil, err
	}
	return r.w.view, nil
}

// Collect collects k, served here, if every record it holds is a
// tombstone deleted at or before before (one written by an older version,
// undated, counts as old enough): every replica of k's set must store
// them again and then forget the key, which raises its horizon there
// (replica.Horizon) so that no replica can bring an older record back.
// It returns once that ended: collected reports whether a sweep ran and
// k holds no record since. A key with a live record or one deleted after
// before is not collected (collected false, no error); nor is one whose
// sweep a replica did not answer (it gives up after a few resends: the
// error matches ErrSweepGaveUp). Nothing is lost either way, and a later
// Collect tries again. A key not served here fails with
// replica.ErrNotServing. If ctx ends first the sweep goes on and the
// error matches ErrUnavailable.
func (n *Node) Collect(ctx context.Context, k replica.Key, before time.Time) (collected bool, err error) {
	r := &request{op: opCollect, key: k, before: before}
	if err := n.call(ctx, r); err != nil {
		return false, err
	}
	return r.w.collected, nil
}

// Collectable lists up to limit keys of the node's store that want
// accepts (nil: every one) and whose records (its promise aside, and
// those its horizon covers) are all tombstones deleted at or before
// before, or undated (see Collect). It reads the ring in order from the
// token after after, and returns the token to pass next time, so that
// successive calls go round the ring. It reads the store, not the loop's
// state: a key written since may be listed, which Collect then leaves as
// it is.
func (n *Node) Collectable(ctx context.Context, after ring.Token, before time.Time, limit int, want func(replica.Key) bool) (keys []replica.Key, next ring.Token, err error) {
	var (
		cur     replica.Key
		horizon replica.Horizon
		seen    bool // cur has a record besides its promise
		ok      bool // and every one is an old enough tombstone
	)
	next = after
	done := func() {
		if seen && ok && (want == nil || want(cur)) {
			keys = append(keys, cur)
		}
	}
	err = n.store.Range(ctx, ring.Range{Start: after, End: after}, func(r replica.Record) bool {
		if r.Key != cur {
			done()
			if len(keys) >= limit {
				return false
			}
			cur, horizon, seen, ok = r.Key, replica.Horizon{}, false, true
			next = r.Key.Token()
		}
		if r.Kind == replica.KindPromise {
			horizon, _ = replica.HorizonOf(r)
			return true
		}
		if horizon.Covers(r) {
			return true
		}
		seen = true
		at, dated := DeletedAt(r)
		ok = ok && r.Tombstone && (!dated || !at.After(before))
		return true
	})
	if err != nil {
		return nil, after, err
	}
	if len(keys) < limit {
		done()
		next = after // the whole ring was read: the next call reads it again
	}
	return keys, next, nil
}

// DeletedAt returns when the tombstone r was written (to the
// millisecond, by the owner's clock); ok is false for a record that is
// not a tombstone or carries no date.
func DeletedAt(r replica.Record) (at time.Time, ok bool) {
	if !r.Tombstone || len(r.Value) != 8 {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(r.Value))), true
}

// Resign stops serving k here without waiting; what waited on k fails
// with ErrResigned. It does nothing on a key not held.
func (n *Node) Resign(k replica.Key) error {
	if !n.enqueue(input{req: &request{op: opResign, key: k}}) {
		return n.closedErr()
	}
	return nil
}

// SetReceiving adds ranges to those this node is still receiving from
// their previous replicas: a member about to become a replica of a range
// at a hand-off names it before it is placed there. It never ends
// receiving a range (CatchUp does; CountEverywhere overrides), so a node
// still receiving the whole ring stays so. Its answers about keys in the
// ranges do not count toward quorums from the next batch on, and the
// ranges are recorded in the store before any answer leaves, so a
// restart receives them too. With no ranges it does nothing.
func (n *Node) SetReceiving(ranges ...ring.Range) error {
	if !n.enqueue(input{req: &request{op: opReceiving, ranges: slices.Clone(ranges)}}) {
		return n.closedErr()
	}
	return nil
}

// CountEverywhere makes this node count toward quorums for every key at
// once, whatever it was receiving, and records that in its store. It is
// an operator's decision after a loss no catch-up can repair (a
// whole-cluster power loss without Sync leaves every member receiving and
// no counted source): acknowledged writes may be lost.
func (n *Node) CountEverywhere() error {
	if !n.enqueue(input{req: &request{op: opCountEverywhere}}) {
		return n.closedErr()
	}
	return nil
}

// Close stops the node: calls waiting fail with ErrClosed, and the store
// is closed if the node opened it. Messages already handed to the
// endpoint still travel; the endpoint stays open. Close waits for the
// loop until ctx ends.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.stop)
	}
	n.mu.Unlock()
	select {
	case <-n.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	n.mu.Lock()
	err := n.err
	n.mu.Unlock()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// run is the loop that owns the core.
func (n *Node) run(tick <-chan time.Time, stopTicker func()) {
	defer close(n.done)
	if stopTicker != nil {
		defer stopTicker()
	}
	err := n.loop(tick)
	n.mu.Lock()
	n.closed = true
	n.err = err
	left := n.queue
	n.queue = nil
	n.mu.Unlock()
	n.syncStop()
	<-n.syncDone
	// A request queued as the loop stopped is answered too: an
	// asynchronous write's done is called once whatever happens.
	for _, in := range left {
		if in.req != nil && in.req.w != nil && in.req.op != opAbandon {
			in.req.w.finish(err)
		}
	}
	// Answers collected but not flushed were not persisted: they fail.
	for _, w := range n.waiters {
		w.finish(err)
	}
	for _, a := range n.answers {
		a.w.finish(err)
	}
	for _, ws := range n.acquiring {
		for _, w := range ws {
			w.finish(err)
		}
	}
	for _, ws := range n.collecting {
		for _, w := range ws {
			w.finish(err)
		}
	}
	if n.ownStore {
		if cerr := n.store.Close(); cerr != nil {
			n.log.Warn("closing the store", "err", cerr)
		}
	}
}

func (n *Node) loop(tick <-chan time.Time) error {
	for {
		select {
		case <-n.stop:
			return ErrClosed
		case <-n.wake:
		case <-tick:
			n.core.Tick()
			n.collect()
		case <-n.cfg.ticks:
			n.core.Tick()
			n.collect()
		}
		// Let the goroutines that are ready to queue a write or a message
		// (handlers, the transport's readers) run first: one flush then
		// carries more of them, in fewer envelopes and system calls.
		runtime.Gosched()
		n.mu.Lock()
		batch := n.queue
		n.queue = n.spare[:0]
		n.mu.Unlock()
		for _, in := range batch {
			if in.req != nil {
				n.apply(in.req)
			} else {
				n.core.Step(in.msg)
			}
			n.collect()
		}
		clear(batch)
		n.spare = batch
		if err := n.flush(); err != nil {
			return err
		}
	}
}

// apply runs one request against the core.
func (n *Node) apply(r *request) {
	switch r.op {
	case opAcquire:
		opts := replica.AcquireOptions{Previous: r.previous, Copiers: r.copiers, Gone: r.gone, View: r.view}
		if n.core.Holds(r.key, r.replicas, opts) {
			if n.core.Serving(r.key) {
				r.w.finish(nil)
				return
			}
		} else {
			// Held over another set (or not jointly when a previous set
			// is named): the core would step down and acquire again.
			// Resigning first settles what waited on the old ownership
			// before this caller waits on the new one.
			n.core.Resign(r.key)
			n.collect()
		}
		if err := n.core.AcquireWith(r.key, r.replicas, r.level, opts); err != nil {
			r.w.finish(fmt.Errorf("troupe: acquire %s/%s: %w", r.key.Type, r.key.ID, err))
			return
		}
		n.acquiring[r.key] = append(n.acquiring[r.key], r.w)
	case opWrite:
		if n.core.InFlight(r.key) >= n.cfg.MaxWritesInFlight {
			r.w.finish(fmt.Errorf("%w: %w: %s/%s", ErrUnavailable, ErrTooManyWrites, r.key.Type, r.key.ID))
			return
		}
		value := r.value
		if r.tombstone {
			// A tombstone is dated, for Collect.
			value = binary.BigEndian.AppendUint64(nil, uint64(n.cfg.Now().UnixMilli()))
		}
		t, err := n.core.Write(r.key, r.slot, value, r.tombstone)
		if err != nil {
			r.w.finish(fmt.Errorf("troupe: write %s/%s: %w", r.key.Type, r.key.ID, err))
			return
		}
		r.w.ticket = t
		n.waiters[t] = r.w
	case opRead:
		view, t, err := n.core.Read(r.key)
		if err != nil {
			r.w.finish(fmt.Errorf("troupe: read %s/%s: %w", r.key.Type, r.key.ID, err))
			return
		}
		for slot, rec := range view {
			rec.Value = slices.Clone(rec.Value)
			view[slot] = rec
		}
		r.w.ticket, r.w.view = t, view
		n.waiters[t] = r.w
	case opResign:
		n.core.Resign(r.key)
	case opReceiving:
		n.core.AddReceiving(r.ranges...)
		n.receivingChanged = true
	case opCountEverywhere:
		n.core.CountEverywhere()
		n.receivingChanged = true
	case opSync:
		n.core.CatchUp(r.records...)
		// Answered once the batch is persisted: a chunk counts only
		// once it is stored.
		n.answers = append(n.answers, answer{r.w, nil})
	case opHighestTerm:
		for _, g := range r.ranges {
			r.term = max(r.term, n.core.HighestTerm(g))
		}
		r.w.finish(nil)
	case opReceived:
		for _, g := range r.ranges {
			n.core.Received(g)
		}
		n.receivingChanged = true
		// Answered once the new ranges are recorded.
		n.answers = append(n.answers, answer{r.w, nil})
	case opCollect:
		expired := func(rec replica.Record) bool {
			at, ok := DeletedAt(rec)
			return !ok || !at.After(r.before)
		}
		switch {
		case !n.core.Serving(r.key):
			r.w.finish(fmt.Errorf("troupe: collect %s/%s: %w", r.key.Type, r.key.ID, replica.ErrNotServing))
		case n.core.Sweeping(r.key) || n.core.SweepKey(r.key, expired):
			n.collecting[r.key] = append(n.collecting[r.key], r.w)
		default:
			r.w.finish(nil) // nothing to collect: collected stays false
		}
	case opAbandon:
		if r.abandoned == opCollect {
			n.collecting[r.key] = slices.DeleteFunc(n.collecting[r.key], func(w *waiter) bool { return w == r.w })
			if len(n.collecting[r.key]) == 0 {
				delete(n.collecting, r.key)
			}
			return
		}
		if r.abandoned != opAcquire {
			// A request that failed at once has no ticket: nothing to drop.
			if r.w.ticket != 0 {
				delete(n.waiters, r.w.ticket)
			}
			return
		}
		ws, ok := n.acquiring[r.key]
		if !ok || !slices.Contains(ws, r.w) {
			return // answered meanwhile
		}
		ws = slices.DeleteFunc(ws, func(w *waiter) bool { return w == r.w })
		if len(ws) > 0 {
			n.acquiring[r.key] = ws
			return
		}
		delete(n.acquiring, r.key)
		// Nobody waits for the key any more: an acquisition that cannot
		// meet its level stops asking.
		if !n.core.Serving(r.key) {
			n.core.Resign(r.key)
		}
	}
}

// collect takes the core's Ready after one input: its records and
// messages join the batch's, and the waiters it settles are set aside
// with their answers until the batch is persisted and sent. Taking Ready
// per input keeps each answer tied to the input that caused it (a key
// resigned and acquired again in one batch).
func (n *Node) collect() {
	n.collected()
	rd := n.core.Ready()
	if rd.IsEmpty() {
		return
	}
	// What the batch keeps is copied out of rd below: the core builds its
	// next Ready in rd's slices.
	defer n.core.Recycle(rd)
	n.out.Persist = append(n.out.Persist, rd.Persist...)
	if rd.Floors != nil {
		n.out.Floors = rd.Floors
	}
	n.out.Messages = append(n.out.Messages, rd.Messages...)
	// Why each stepped-down key stepped down, for its failed waiters.
	var down map[replica.Key]error
	for _, c := range rd.Changes {
		if c.Serving {
			continue
		}
		if down == nil {
			down = make(map[replica.Key]error)
		}
		if c.Epoch.IsZero() {
			down[c.Key] = fmt.Errorf("%w: %s/%s", ErrResigned, c.Key.Type, c.Key.ID)
		} else {
			down[c.Key] = &StaleOwnerError{Key: c.Key, Newer: c.Epoch, Floor: c.Floor, Copiers: c.Copiers, Departed: c.Departed}
		}
	}
	for _, t := range rd.Done {
		if w := n.waiters[t]; w != nil {
			delete(n.waiters, t)
			n.answers = append(n.answers, answer{w, nil})
		}
	}
	for _, t := range rd.Failed {
		if w := n.waiters[t]; w != nil {
			delete(n.waiters, t)
			n.answers = append(n.answers, answer{w, down[w.key]})
		}
	}
	for _, c := range rd.Changes {
		var err error
		if !c.Serving {
			err = down[c.Key]
		}
		for _, w := range n.acquiring[c.Key] {
			n.answers = append(n.answers, answer{w, err})
		}
		delete(n.acquiring, c.Key)
	}
}

// collected answers the callers of Collect whose key's sweep ended (a
// sweep that gives up does so on a Tick, with nothing else to do), once
// the batch is persisted: what the sweep erased here is, then.
func (n *Node) collected() {
	for k, ws := range n.collecting {
		if n.core.Sweeping(k) {
			continue
		}
		empty := n.core.Empty(k)
		var err error
		if !empty && n.core.SweepGaveUp(k) {
			err = fmt.Errorf("troupe: collect %s/%s: %w", k.Type, k.ID, ErrSweepGaveUp)
		}
		for _, w := range ws {
			w.collected = empty
			n.answers = append(n.answers, answer{w, err})
		}
		delete(n.collecting, k)
	}
}

// flush does what the batch's Readys asked, in their order: persist,
// send, then answer the waiters. A store that fails stops the node: the
// core has moved on in memory past what it could persist.
func (n *Node) flush() error {
	if n.receivingChanged {
		n.receivingChanged = false
		r := n.core.Receiving()
		if err := n.store.SetReceiving(context.Background(), r); err != nil {
			n.log.Error("the store failed; the node stops", "err", err)
			return fmt.Errorf("troupe: replication node %v: record receiving: %w", n.self, err)
		}
		n.mu.Lock()
		n.receiving = r
		// What it received since is no longer lost.
		n.lost = replica.Intersect(n.lost, r...)
		n.mu.Unlock()
	}
	if n.out.Floors != nil {
		if err := n.store.SetFloors(context.Background(), n.out.Floors); err != nil {
			n.log.Error("the store failed; the node stops", "err", err)
			return fmt.Errorf("troupe: replication node %v: record floors: %w", n.self, err)
		}
		n.out.Floors = nil
	}
	if len(n.out.Persist) > 0 {
		if err := n.store.Put(context.Background(), n.out.Persist...); err != nil {
			n.log.Error("the store failed; the node stops", "err", err)
			return fmt.Errorf("troupe: replication node %v: persist: %w", n.self, err)
		}
	}
	// The batch's replication envelopes and the replies its answers
	// release (to the askers of the writes) leave in one write per peer
	// rather than one each.
	if h, ok := n.ep.(transport.Holder); ok && len(n.out.Messages)+len(n.answers) > 0 {
		release := h.Hold()
		defer release()
	}
	n.send(n.out.Messages)
	for _, a := range n.answers {
		a.w.finish(a.err)
	}
	clear(n.out.Persist)
	clear(n.out.Messages)
	clear(n.answers)
	n.out.Persist, n.out.Messages, n.answers = n.out.Persist[:0], n.out.Messages[:0], n.answers[:0]
	return nil
}

// send packs the messages of one flush into one envelope per peer (up to
// MaxBatch bytes each) and posts them. A message that cannot be posted is
// dropped: the core sends again at the next tick what stays unanswered.
func (n *Node) send(msgs []replica.Message) {
	if len(msgs) == 0 {
		return
	}
	// Group by peer, keeping each peer's messages in order.
	byPeer := make(map[ring.NodeID][]int, 4)
	for i, m := range msgs {
		byPeer[m.To] = append(byPeer[m.To], i)
	}
	for _, to := range slices.SortedFunc(maps.Keys(byPeer), ring.NodeID.Compare) {
		idx := byPeer[to]
		for len(idx) > 0 {
			n.scratch, n.ends = n.scratch[:0], n.ends[:0]
			k := 0
			for k < len(idx) {
				n.scratch = replica.AppendEncode(n.scratch, msgs[idx[k]])
				n.ends = append(n.ends, len(n.scratch))
				k++
				if len(n.scratch) >= n.cfg.MaxBatch {
					break
				}
			}
			idx = idx[k:]
			buf := n.ep.Buffer(len(n.scratch) + 10*(len(n.ends)+1) + 1)
			buf = appendEnvelope(buf, n.scratch, n.ends)
			if err := n.ep.Post(to, transport.StreamReplication, 0, buf); err != nil {
				n.log.Debug("a replication envelope was not sent", "to", to.String(), "err", err)
			}
		}
	}
}
