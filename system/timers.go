package system

import (
	"cmp"
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

// Timers after a failover, a move or a restart.
//
// A durable key's timers live in its record and keep its activation from
// passivating; an activation sets them again when it loads the record.
// What ends such an activation with no message to follow is its owner
// dying or restarting, the key moving (its owner, or its replica set,
// changing: see remote.Router.MoveOut), a failed commit or Release. So
// the member keeps the set of keys whose stored state holds a timer
// (timedStore, noted as records are stored, whoever wrote them), and
// after every change of its view, every range it finished receiving, a
// catch-up, its start and the end of such a key's activation, it wakes
// those it owns that no activation holds: the runtime activates each
// (host.TimerWaker), adopting its replicas' newest record, and the
// timers fire on the owner.
//
// It reads this member's copy: a key whose newest record holds a timer
// is woken by its owner if the owner's copy holds one too. With
// Majority, the owner that wrote it holds it; a new owner after a
// failover does unless it missed that write (it was cut off then), and
// then the key waits for its next message.

// timedStore is the member's store, keeping the set of keys whose stored
// state holds a timer.
type timedStore struct {
	replicastore.Store

	mu    sync.Mutex
	timed map[replica.Key]struct{}
	// touched lists the keys stored while the first scan (index) reads
	// the store, whose copy it read may be older; nil once it is done.
	touched map[replica.Key]struct{}
	// broken lists the keys with timers whose activation failed for a
	// reason a retry does not mend (a state that no longer decodes):
	// not woken again until they are stored again.
	broken map[replica.Key]struct{}
}

func newTimedStore(s replicastore.Store) *timedStore {
	return &timedStore{Store: s, timed: make(map[replica.Key]struct{}), touched: make(map[replica.Key]struct{}),
		broken: make(map[replica.Key]struct{})}
}

// Put implements replicastore.Store, noting which records hold timers.
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
		if r.Erases() || r.Tombstone || !runtime.RecordHasTimers(r.Value) {
			delete(t.timed, r.Key)
		} else {
			t.timed[r.Key] = struct{}{}
		}
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
	var found []replica.Key
	err := t.Store.Range(ctx, ring.Range{}, func(r replica.Record) bool {
		if r.Kind == replica.KindState && !r.Tombstone && runtime.RecordHasTimers(r.Value) {
			found = append(found, r.Key)
		}
		return true
	})
	if err != nil {
		return err // read again by the next call
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range found {
		if _, ok := t.touched[k]; !ok {
			t.timed[k] = struct{}{}
		}
	}
	t.touched = nil
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
	_, ok := t.timed[k]
	return ok
}

// markBroken leaves k asleep until it is stored again.
func (t *timedStore) markBroken(k replica.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.timed[k]; ok {
		t.broken[k] = struct{}{}
	}
}

// keys returns the keys whose stored state holds a timer, in ring order,
// but those marked broken.
func (t *timedStore) keys() []replica.Key {
	t.mu.Lock()
	ks := make([]replica.Key, 0, len(t.timed))
	for k := range t.timed {
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
// wakes keys: the changes of one event (a member joining, say) come in
// several views, and the activations the change ended leave meanwhile.
const wakeSettle = 100 * time.Millisecond

// wakeTimeout bounds one key's wake: a key that is not active by then is
// tried again at a later pass.
const wakeTimeout = 30 * time.Second

// wakeParallel is how many keys the waker wakes at once.
const wakeParallel = 16

// wakeRetryMin and wakeRetryMax bound the pause before a pass that
// follows one where some key could not be woken, and the least time
// between passes that activations ending ask for (pokeWakerSoon).
const (
	wakeRetryMin = time.Second
	wakeRetryMax = 30 * time.Second
)

// pokeWaker asks the waker for a pass (the view changed, a range
// arrived): it does not block.
func (s *states) pokeWaker() {
	select {
	case s.wakeNow <- struct{}{}:
	default:
	}
}

// pokeWakerSoon asks the waker for a pass no sooner than its pause
// allows: an activation of a key with timers ended (a failed commit,
// Release, the end of one a change moved), which must not drive passes
// faster than failing wakes would.
func (s *states) pokeWakerSoon() {
	select {
	case s.wakeSoon <- struct{}{}:
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
// after a pause while that fails), then makes a pass wakeSettle after
// each poke, and again after a pass that left keys asleep, with a
// pause growing from wakeRetryMin to wakeRetryMax.
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
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		armed    bool
		at, last time.Time // when the timer fires; when the last pass ended
		pause    time.Duration
	)
	schedule := func(when time.Time) {
		if !armed || when.Before(at) {
			armed, at = true, when
			timer.Reset(time.Until(when))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wakeNow:
			pause = 0
			schedule(time.Now().Add(wakeSettle))
		case <-s.wakeSoon:
			now := time.Now()
			schedule(maxTime(now.Add(wakeSettle), last.Add(max(pause, wakeRetryMin))))
		case <-timer.C:
			armed = false
			left := s.wakePass(ctx)
			last = time.Now()
			if left == 0 {
				pause = 0
				continue
			}
			pause = min(max(2*pause, wakeRetryMin), wakeRetryMax)
			schedule(last.Add(pause))
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

// wakePass wakes the keys with stored timers that this member owns and
// no activation holds, and returns how many could not be woken.
func (s *states) wakePass(ctx context.Context) (left int) {
	s.mu.Lock()
	h := s.wakeHost
	s.mu.Unlock()
	if h == nil {
		return 0
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		slots = make(chan struct{}, wakeParallel)
	)
	for _, k := range s.timed.keys() {
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
			return left
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
				mu.Lock()
				left++
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
	if left > 0 {
		s.log.Info("troupe: keys with stored timers not woken yet; tried again later", "keys", left)
	}
	return left
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
