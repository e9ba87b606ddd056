package system

import (
	"cmp"
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
// by that time.
type timedStore struct {
	replicastore.Store
	retain time.Duration

	mu  sync.Mutex
	due map[replica.Key]int64 // Unix nanoseconds
	// queue orders keys by due time; an entry whose time the key no
	// longer has in due (it was stored again since) is stale, unless
	// retry (a wake that failed, tried again then).
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
}

// newTimedStore wraps s; retain is how long kept answers are kept
// (replication.KeptAnswers.Retain): a key whose oldest outlived it is
// woken to drop it, as if a timer were due then (later by twice the
// waker's lead, so that the answer has outlived it when the key loads).
func newTimedStore(s replicastore.Store, retain time.Duration) *timedStore {
	if retain > 0 {
		retain += 2 * wakeLead
	}
	return &timedStore{Store: s, retain: retain, due: make(map[replica.Key]int64), touched: make(map[replica.Key]struct{}),
		broken: make(map[replica.Key]struct{}), sooner: make(chan struct{}, 1)}
}

// dueEntry is a key in the queue, with when to wake it.
type dueEntry struct {
	at    int64
	key   replica.Key
	retry bool
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
	*q = old[:len(old)-1]
	return e
}

// pushLocked queues e, telling the waker if it comes first; t.mu held.
// A queue grown to more than twice the keys (stale entries of keys
// stored again) is made again from due.
func (t *timedStore) pushLocked(e dueEntry) {
	if len(t.queue) > 2*len(t.due)+1024 {
		t.requeueLocked()
	}
	first := len(t.queue) == 0 || e.at < t.queue[0].at
	heap.Push(&t.queue, e)
	if first {
		select {
		case t.sooner <- struct{}{}:
		default:
		}
	}
}

// requeueLocked makes the queue again: one entry per key with timers,
// but those marked broken; t.mu held.
func (t *timedStore) requeueLocked() {
	t.queue = t.queue[:0]
	for k, at := range t.due {
		if _, ok := t.broken[k]; !ok {
			t.queue = append(t.queue, dueEntry{at: at, key: k})
		}
	}
	heap.Init(&t.queue)
	select {
	case t.sooner <- struct{}{}:
	default:
	}
}

// requeue queues every key with timers again: the waker looks at each
// once more (this member may own keys it did not).
func (t *timedStore) requeue() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requeueLocked()
}

// Put implements replicastore.Store, noting which records hold timers
// and when.
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
		delete(t.broken, r.Key)
		var due time.Time
		ok := !r.Erases() && !r.Tombstone
		if ok {
			due, ok = runtime.RecordWakeDue(r.Value, t.retain)
		}
		if !ok {
			delete(t.due, r.Key)
			continue
		}
		at := due.UnixNano()
		if was, ok := t.due[r.Key]; ok && was == at {
			continue // queued already (or dropped as held: see next)
		}
		t.due[r.Key] = at
		t.pushLocked(dueEntry{at: at, key: r.Key})
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

// has reports whether k's stored state holds a timer.
func (t *timedStore) has(k replica.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.due[k]
	return ok
}

// ended queues k, whose activation ended, to be woken when its first
// timer is due, and not before after: the end of an activation (a
// failed commit, say) must not drive wakes faster than that.
func (t *timedStore) ended(k replica.Key, after time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.due[k]
	if _, broken := t.broken[k]; !ok || broken {
		return
	}
	t.pushLocked(dueEntry{at: max(at, after.UnixNano()), key: k, retry: true})
}

// retry queues k to be woken again at at, a wake of it having failed.
func (t *timedStore) retry(k replica.Key, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.due[k]; ok {
		t.pushLocked(dueEntry{at: at.UnixNano(), key: k, retry: true})
	}
}

// next returns when the queue's first key is due, if any is queued.
func (t *timedStore) next() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, t.queue[0].at), true
}

// takeDue takes from the queue the keys due by now, each once, skipping
// stale entries and keys marked broken.
func (t *timedStore) takeDue(now time.Time) []replica.Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ks []replica.Key
	seen := make(map[replica.Key]bool)
	for len(t.queue) > 0 && t.queue[0].at <= now.UnixNano() {
		e := heap.Pop(&t.queue).(dueEntry)
		at, ok := t.due[e.key]
		if _, broken := t.broken[e.key]; !ok || broken || seen[e.key] || !e.retry && at != e.at {
			continue
		}
		seen[e.key] = true
		ks = append(ks, e.key)
	}
	return ks
}

// markBroken leaves k asleep until it is stored again.
func (t *timedStore) markBroken(k replica.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.due[k]; ok {
		t.broken[k] = struct{}{}
	}
}

// keys returns the keys whose stored state holds a timer, in ring order,
// but those marked broken.
func (t *timedStore) keys() []replica.Key {
	t.mu.Lock()
	ks := make([]replica.Key, 0, len(t.due))
	for k := range t.due {
		if _, ok := t.broken[k]; !ok {
			ks = append(ks, k)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(ks, func(a, b replica.Key) int {
		return cmp.Or(cmp.Compare(a.Token(), b.Token()), cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID))
	})
	return ks
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
// not be woken is tried again; it grows while wakes keep failing.
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

// wakeTimers runs the waker until ctx ends: it indexes the store (again
// after a pause while that fails), then wakes each key when its first
// timer is due (wakeLead early), and looks at every key again
// wakeSettle after each poke.
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
	alarm := time.NewTimer(time.Hour)
	defer alarm.Stop()
	var (
		poked   time.Time     // when to look at every key again; zero: no poke waits
		pause   time.Duration // before a failed wake is tried again
		stopped = true        // alarm is stopped (or fired and read)
	)
	for {
		at, queued := s.timed.next()
		if queued {
			at = at.Add(-wakeLead)
		}
		if !poked.IsZero() && (!queued || poked.Before(at)) {
			at, queued = poked, true
		}
		if !stopped {
			alarm.Stop()
			stopped = true
		}
		if queued {
			alarm.Reset(time.Until(at))
			stopped = false
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wakeNow:
			if poked.IsZero() {
				poked = time.Now().Add(wakeSettle)
			}
		case <-s.timed.sooner:
		case <-alarm.C:
			stopped = true
			now := time.Now()
			if !poked.IsZero() && !now.Before(poked) {
				poked = time.Time{}
				s.timed.requeue()
			}
			failed := s.wakeDue(ctx, now.Add(wakeLead), pause)
			switch {
			case failed > 0:
				pause = min(max(2*pause, wakeRetryMin), wakeRetryMax)
			default:
				pause = 0
			}
		}
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

// wakeDue wakes the keys with stored timers due by by that this member
// owns and no activation holds, and returns how many could not be woken:
// those are queued again after pause (at least wakeRetryMin). A key it
// does not own, or that an activation holds, leaves the queue until the
// view changes or that activation ends.
func (s *states) wakeDue(ctx context.Context, by time.Time, pause time.Duration) (failed int) {
	s.mu.Lock()
	h := s.wakeHost
	s.mu.Unlock()
	if h == nil {
		return 0 // setHost pokes once it is
	}
	pause = max(pause, wakeRetryMin)
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		slots = make(chan struct{}, wakeParallel)
	)
	for _, k := range s.timed.takeDue(by) {
		if !s.owns(k) {
			continue
		}
		w, ok := h.Kind(k.Type).(host.TimerWaker)
		if !ok {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return failed
		}
		wg.Go(func() {
			defer func() { <-slots }()
			done := make(chan error, 1)
			w.WakeTimers(k.ID, func(err error) { done <- err })
			t := time.NewTimer(wakeTimeout)
			defer t.Stop()
			var err error
			select {
			case err = <-done:
			case <-t.C:
				err = context.DeadlineExceeded
			case <-ctx.Done():
				return
			}
			switch {
			case err == nil:
			case errors.Is(err, actor.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
				s.log.Debug("troupe: waking a key with stored timers", "type", k.Type, "key", k.ID, "err", err)
				s.timed.retry(k, time.Now().Add(pause))
				mu.Lock()
				failed++
				mu.Unlock()
			default:
				// Its state no longer decodes, say: retrying mends
				// nothing, and the next message reports it.
				s.log.Warn("troupe: a key with stored timers cannot be activated; its timers wait until it is written again", "type", k.Type, "key", k.ID, "err", err)
				s.timed.markBroken(k)
			}
		})
	}
	wg.Wait()
	if failed > 0 {
		s.log.Info("troupe: keys with stored timers not woken yet; tried again later", "keys", failed, "in", pause)
	}
	return failed
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
