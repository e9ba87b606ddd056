package system

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/ring"
)

// Timers after a failover, a move, a restart or a passivation.
//
// A durable key's timers live in its record; an activation sets them
// again when it loads the record. What ends such an activation with no
// message to follow is its owner dying or restarting, the key moving
// (its owner, or its replica set, changing: see remote.Router.MoveOut),
// a failed commit, Release, or passivation: an idle key whose timers are
// all stored as they stand passivates with them (the runtime's
// timersSavedLocked). So the member keeps, for each key whose stored
// state holds a timer, when the first is due (timedStore, noted as
// records are stored, whoever wrote them), and wakes the keys it owns
// that no activation holds when their first timer is due: the runtime
// activates each (host.TimerWaker), adopting its replicas' newest
// record, and the timers fire on the owner. After a change of its view,
// a range it finished receiving, a catch-up or its start, it looks at
// every such key again (keys it did not own before); when an activation
// of such a key ends, at that key.
//
// It reads this member's copy: a key whose newest record holds a timer
// is woken by its owner if the owner's copy holds one too. With
// Majority, the owner that wrote it holds it; a new owner after a
// failover does unless it missed that write (it was cut off then), and
// then the key waits for its next message.

// timedStore is the member's store, keeping for each key whose stored
// state holds a timer when the first is due, and a queue of those keys
// by when to wake them.
type timedStore struct {
	replicastore.Store
	retain time.Duration

	mu  sync.Mutex
	due map[replica.Key]int64 // Unix nanoseconds
	// back holds, for a key whose wake failed or whose activation ended
	// soon after it was woken, when it may be woken again and the pause
	// that gave that; a key stored again (progress) leaves it.
	back map[replica.Key]backoff
	// woke holds when each key was last woken, until it is stored again.
	woke map[replica.Key]int64
	// queue orders keys by when to wake them: an entry whose time is not
	// the key's wakeAt (stored again, backed off since) is stale.
	queue dueQueue
	// touched lists the keys stored while the first scan (index) reads
	// the store, whose copy it read may be older; nil once it is done.
	touched map[replica.Key]struct{}
	// broken lists the keys with timers whose activation failed for a
	// reason a retry does not mend (a state that no longer decodes):
	// not woken again until they are stored again.
	broken map[replica.Key]struct{}
	// sooner is told (without blocking) when the queue's first entry
	// becomes earlier: the waker's alarm may be set too late.
	sooner chan struct{}
	// since holds, while requeue makes the queue again (rebuilding),
	// the keys queued meanwhile and when, which the new queue takes too
	// (and requeue does not list again).
	since      map[replica.Key]int64
	rebuilding bool
	// betweenBatches, when set (tests), runs between requeue's batches
	// and after the last (listed), without t.mu.
	betweenBatches func(listed bool)
}

// backoff is a key's: not woken before until; pause grows with each
// failure, from wakeRetryMin to wakeRetryMax; wake is the wake (its
// time) the last pause was for, which grows it once.
type backoff struct {
	until int64
	pause time.Duration
	wake  int64
}

// newTimedStore wraps s; retain is how long kept answers are kept
// (replication.KeptAnswers.Retain): a key whose oldest outlived it is
// woken to drop it, as if a timer were due then (later by twice the
// waker's lead, so that the answer has outlived it when the key loads).
func newTimedStore(s replicastore.Store, retain time.Duration) *timedStore {
	if retain > 0 {
		retain += 2 * wakeLead
	}
	return &timedStore{Store: s, retain: retain, due: make(map[replica.Key]int64), back: make(map[replica.Key]backoff),
		woke: make(map[replica.Key]int64), touched: make(map[replica.Key]struct{}), broken: make(map[replica.Key]struct{}),
		sooner: make(chan struct{}, 1)}
}

// dueEntry is a key in the queue, with when to wake it.
type dueEntry struct {
	at  int64
	key replica.Key
}

// dueQueue is a min-heap of entries by time (container/heap).
type dueQueue []dueEntry

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q dueQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *dueQueue) Push(x any)        { *q = append(*q, x.(dueEntry)) }
func (q *dueQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = dueEntry{} // no key kept alive by the spare capacity
	*q = old[:len(old)-1]
	return e
}

// wakeAtLocked is when k may be woken: when its first timer is due, not
// before its backoff ends; ok false for a key with no timer, or broken.
// t.mu held.
func (t *timedStore) wakeAtLocked(k replica.Key) (at int64, ok bool) {
	at, ok = t.due[k]
	if _, broken := t.broken[k]; !ok || broken {
		return 0, false
	}
	if b, backed := t.back[k]; backed {
		at = max(at, b.until)
	}
	return at, true
}

// queueLocked queues k at its wakeAt, telling the waker if it comes
// first; t.mu held. A queue grown to more than twice the keys (stale
// entries of keys stored again) is made again.
func (t *timedStore) queueLocked(k replica.Key) {
	at, ok := t.wakeAtLocked(k)
	if !ok {
		return
	}
	if len(t.queue) > 2*len(t.due)+1024 && !t.rebuilding { // requeue replaces it anyway
		t.requeueLocked()
	}
	first := len(t.queue) == 0 || at < t.queue[0].at
	heap.Push(&t.queue, dueEntry{at: at, key: k})
	if t.rebuilding {
		t.since[k] = at
	}
	if first {
		t.tellSooner()
	}
}

func (t *timedStore) tellSooner() {
	select {
	case t.sooner <- struct{}{}:
	default:
	}
}

// requeueLocked makes the queue again: one entry per key with timers,
// but those marked broken; t.mu held.
func (t *timedStore) requeueLocked() {
	t.queue = t.queue[:0]
	for k := range t.due {
		if at, ok := t.wakeAtLocked(k); ok {
			t.queue = append(t.queue, dueEntry{at: at, key: k})
		}
	}
	heap.Init(&t.queue)
	t.tellSooner()
}

// requeue queues every key with timers again: the waker looks at each
// once more (this member may own keys it did not). It takes time in the
// number of such keys, but holds the lock Put takes (on the replication
// loop) for requeueBatch keys at a time: it lists the keys in batches,
// makes the new queue without the lock, and swaps it in with the keys
// queued meanwhile (not listed again, so each has one entry). An entry
// listed before its key changed is stale, as in any queue; a key listed
// and then queued again at the same time (requeueKey) has two, and may
// be woken twice, the second finding it awake. The waker alone calls
// it.
func (t *timedStore) requeue() {
	t.mu.Lock()
	t.rebuilding, t.since = true, make(map[replica.Key]int64)
	fresh := make(dueQueue, 0, len(t.due))
	n := 0
	for k := range t.due { // a map may change while it is ranged over
		_, queued := t.since[k] // an entry of since, once
		if at, ok := t.wakeAtLocked(k); ok && !queued {
			fresh = append(fresh, dueEntry{at: at, key: k})
		}
		if n++; n%requeueBatch == 0 {
			t.mu.Unlock()
			if t.betweenBatches != nil {
				t.betweenBatches(false)
			}
			t.mu.Lock()
		}
	}
	t.mu.Unlock()
	if t.betweenBatches != nil {
		t.betweenBatches(true)
	}
	heap.Init(&fresh)
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, at := range t.since {
		heap.Push(&fresh, dueEntry{at: at, key: k})
	}
	t.queue, t.since, t.rebuilding = fresh, nil, false
	t.tellSooner()
}

// requeueBatch is how many keys requeue lists under the lock at a time.
const requeueBatch = 4096

// Put implements replicastore.Store, noting which records hold timers
// and when their key is due.
func (t *timedStore) Put(ctx context.Context, recs ...replica.Record) error {
	err := t.Store.Put(ctx, recs...)
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		if r.Kind != replica.KindState {
			continue
		}
		if t.touched != nil {
			t.touched[r.Key] = struct{}{}
		}
		_, wasBroken := t.broken[r.Key]
		delete(t.broken, r.Key)
		var due time.Time
		ok := !r.Erases() && !r.Tombstone
		if ok {
			// Timers only, which is quick for a record without any (the
			// write path: no kept answers read). The answers of a key
			// written here are its owner's ledger's to expire; those of
			// keys not written since this member started, the index's.
			if due, ok = runtime.RecordWakeDue(r.Value, 0); ok {
				due, _ = runtime.RecordWakeDue(r.Value, t.retain)
			}
		}
		if !ok {
			delete(t.due, r.Key)
			delete(t.back, r.Key)
			delete(t.woke, r.Key)
			continue
		}
		at := due.UnixNano()
		if was, ok := t.due[r.Key]; ok && was == at {
			// Queued already (or left out as held: see takeDue). The
			// same timers are no progress: an acquisition writes back
			// what it adopted, and a key whose handler fails each time
			// stays backed off. A key broken until now is queued again.
			if wasBroken {
				t.queueLocked(r.Key)
			}
			continue
		}
		// Its timers moved: the key made progress.
		delete(t.back, r.Key)
		delete(t.woke, r.Key)
		t.due[r.Key] = at
		t.queueLocked(r.Key)
	}
	return err
}

// Unclean passes the store's own report on (see replicanode.Open).
func (t *timedStore) Unclean() bool {
	u, ok := t.Store.(interface{ Unclean() bool })
	return ok && u.Unclean()
}

// index reads the whole store once for the keys whose state holds a
// timer; a key stored meanwhile is as Put noted it.
func (t *timedStore) index(ctx context.Context) error {
	found := make(map[replica.Key]int64)
	err := t.Store.Range(ctx, ring.Range{}, func(r replica.Record) bool {
		if r.Kind != replica.KindState || r.Tombstone {
			return true
		}
		if due, ok := runtime.RecordWakeDue(r.Value, t.retain); ok {
			found[r.Key] = due.UnixNano()
		}
		return true
	})
	if err != nil {
		return err // read again by the next call
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, at := range found {
		if _, ok := t.touched[k]; !ok {
			t.due[k] = at
		}
	}
	t.touched = nil
	t.requeueLocked()
	return nil
}

// indexed reports whether index read the store to its end.
func (t *timedStore) indexed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.touched == nil
}

// backOffLocked pushes k's next wake back by a pause that doubles each
// time (wakeRetryMin to wakeRetryMax) until k is stored again; t.mu held.
// A wake that both failed and ended an activation (the failed
// acquisition resigns) counts once.
func (t *timedStore) backOffLocked(k replica.Key, now time.Time) time.Duration {
	b := t.back[k]
	if w, ok := t.woke[k]; ok && b.pause > 0 && b.wake == w {
		return b.pause
	}
	b.pause = min(max(2*b.pause, wakeRetryMin), wakeRetryMax)
	b.until = now.Add(b.pause).UnixNano()
	b.wake = t.woke[k]
	t.back[k] = b
	return b.pause
}

// ended queues k, whose activation ended at now, to be woken when its
// first timer is due, not before wakeSettle; an activation that ended
// within wakeRetryMin of a wake (its commits fail, say) backs k off, so
// that such ends do not drive wakes faster than failing wakes would.
func (t *timedStore) ended(k replica.Key, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.due[k]; !ok {
		return
	}
	if w, ok := t.woke[k]; ok && now.UnixNano()-w < int64(wakeRetryMin) {
		t.backOffLocked(k, now)
	} else if b := t.back[k]; b.until < now.Add(wakeSettle).UnixNano() {
		b.until = now.Add(wakeSettle).UnixNano()
		t.back[k] = b
	}
	t.queueLocked(k)
}

// failed queues k again after its backoff, a wake of it having failed
// at now, and returns the pause.
func (t *timedStore) failed(k replica.Key, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.due[k]; !ok {
		return 0
	}
	p := t.backOffLocked(k, now)
	t.queueLocked(k)
	return p
}

// next returns when the queue's first key may be woken, if any is
// queued.
func (t *timedStore) next() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, t.queue[0].at), true
}

// takeDue takes from the queue up to limit keys due by by, each once,
// skipping stale entries, keys marked broken and those skip reports
// (called with t.mu held).
func (t *timedStore) takeDue(by time.Time, limit int, skip func(replica.Key) bool) []replica.Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ks []replica.Key
	for len(ks) < limit && len(t.queue) > 0 && t.queue[0].at <= by.UnixNano() {
		e := heap.Pop(&t.queue).(dueEntry)
		if at, ok := t.wakeAtLocked(e.key); !ok || at != e.at || slices.Contains(ks, e.key) || skip != nil && skip(e.key) {
			continue
		}
		ks = append(ks, e.key)
	}
	return ks
}

// waking notes that k is being woken at now (see ended).
func (t *timedStore) waking(k replica.Key, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.due[k]; ok {
		t.woke[k] = now.UnixNano()
	}
}

// requeueKey queues k again at its wakeAt.
func (t *timedStore) requeueKey(k replica.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queueLocked(k)
}

// markBroken leaves k asleep until it is stored again.
func (t *timedStore) markBroken(k replica.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.due[k]; ok {
		t.broken[k] = struct{}{}
	}
}

// wakeSettle is how long the waker lets a change settle before it
// looks at every key again: the changes of one event (a member joining,
// say) come in several views, and the activations the change ended
// leave meanwhile. An activation that ended is not woken sooner either.
const wakeSettle = 100 * time.Millisecond

// wakeLead is how early the waker wakes a key before its first timer is
// due: the activation (a read of the replicas) happens meanwhile, and
// the timer fires on time from the activation.
const wakeLead = 50 * time.Millisecond

// wakeTimeout bounds one key's wake: a key that is not active by then is
// tried again later.
const wakeTimeout = 30 * time.Second

// wakeParallel is how many keys the waker wakes at once.
const wakeParallel = 16

// wakeRetryMin and wakeRetryMax bound the pause before a key that could
// not be woken is tried again; it doubles while its wakes keep failing.
const (
	wakeRetryMin = time.Second
	wakeRetryMax = 30 * time.Second
)

// pokeWaker asks the waker to look at every key with timers again (the
// view changed, a range arrived): it does not block.
func (s *states) pokeWaker() {
	select {
	case s.wakeNow <- struct{}{}:
	default:
	}
}

// setHost gives the waker the runtime's kinds and asks for a first pass.
func (s *states) setHost(h *host.Host) {
	s.mu.Lock()
	s.wakeHost = h
	s.mu.Unlock()
	s.pokeWaker()
}

// wakeResult is how one key's wake ended.
type wakeResult struct {
	key replica.Key
	err error
}

// wakeTimers runs the waker until ctx ends: it indexes the store (again
// after a pause while that fails), then wakes each key when its first
// timer is due (wakeLead early), wakeParallel at most at once, and looks
// at every key again wakeSettle after each poke. It waits for no wake:
// one that hangs (replicas out of reach, a hand-off's drain) holds its
// slot until wakeTimeout, not the others.
func (s *states) wakeTimers(ctx context.Context) {
	for pause := wakeRetryMin; !s.timed.indexed(); pause = min(2*pause, wakeRetryMax) {
		err := s.timed.index(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("troupe: listing the stored keys with timers failed; trying again", "err", err, "in", pause)
		if !sleepCtx(ctx, pause) {
			return
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	results := make(chan wakeResult, wakeParallel)
	inFlight := make(map[replica.Key]bool)
	// skipped lists keys taken from the queue while their wake was in
	// flight: queued again once it ends, whatever its result.
	skipped := make(map[replica.Key]bool)
	alarm := time.NewTimer(time.Hour)
	defer alarm.Stop()
	var poked time.Time // when to look at every key again; zero: no poke waits
	for {
		s.mu.Lock()
		h := s.wakeHost
		s.mu.Unlock()
		// The alarm: at the first key's time (a slot free and the
		// runtime built: setHost pokes), or the poke's.
		var at time.Time
		armed := false
		if next, ok := s.timed.next(); ok && h != nil && len(inFlight) < wakeParallel {
			at, armed = next.Add(-wakeLead), true
		}
		if !poked.IsZero() && (!armed || poked.Before(at)) {
			at, armed = poked, true
		}
		alarm.Stop()
		if armed {
			alarm.Reset(time.Until(at))
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wakeNow:
			if poked.IsZero() {
				poked = time.Now().Add(wakeSettle)
			}
		case <-s.timed.sooner:
		case r := <-results:
			delete(inFlight, r.key)
			s.woken(r)
			if skipped[r.key] {
				delete(skipped, r.key)
				s.timed.requeueKey(r.key)
			}
		case <-alarm.C:
			now := time.Now()
			if !poked.IsZero() && !now.Before(poked) {
				poked = time.Time{}
				s.timed.requeue()
			}
			if h == nil {
				continue
			}
			skip := func(k replica.Key) bool {
				if inFlight[k] {
					skipped[k] = true
				}
				return inFlight[k]
			}
			for _, k := range s.timed.takeDue(now.Add(wakeLead), wakeParallel-len(inFlight), skip) {
				// Looked at outside the store's lock: placement reads the
				// router's view.
				w, ok := h.Kind(k.Type).(host.TimerWaker)
				if !ok || !s.owns(k) {
					continue
				}
				s.timed.waking(k, now)
				inFlight[k] = true
				wg.Go(func() { results <- wakeResult{k, s.wake(ctx, w, k)} })
			}
		}
	}
}

// wake wakes k through w, waiting at most wakeTimeout.
func (s *states) wake(ctx context.Context, w host.TimerWaker, k replica.Key) error {
	done := make(chan error, 1)
	w.WakeTimers(k.ID, func(err error) { done <- err })
	t := time.NewTimer(wakeTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return context.DeadlineExceeded
	case <-ctx.Done():
		return ctx.Err()
	}
}

// woken handles how a wake ended: a key out of reach is tried again
// after its backoff; one that fails otherwise (its state no longer
// decodes, say) waits until it is written again.
func (s *states) woken(r wakeResult) {
	k, err := r.key, r.err
	switch {
	case err == nil:
	case errors.Is(err, actor.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		pause := s.timed.failed(k, time.Now())
		s.log.Debug("troupe: a key with stored timers not woken yet; tried again later", "type", k.Type, "key", k.ID, "err", err, "in", pause)
	case errors.Is(err, context.Canceled):
	default:
		// Retrying mends nothing, and the next message reports it.
		s.log.Warn("troupe: a key with stored timers cannot be activated; its timers wait until it is written again", "type", k.Type, "key", k.ID, "err", err)
		s.timed.markBroken(k)
	}
}

// sleepCtx waits d, reporting false if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// owns reports whether k is of a durable type this member hosts, a key
// it owns (placement, or pinned here), that no activation holds: one the
// waker wakes, and the collector collects (see collects).
func (s *states) owns(k replica.Key) bool {
	st, ok := s.kinds[k.Type]
	if !ok {
		return false
	}
	if !st.Pinned && s.placed != nil && !s.placed(k.Type, k.ID) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.held[k]
}
