package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// Slot states.
const (
	slotQueued int32 = iota
	slotRunning
	slotDone
	slotCancelled
)

// replier is the untyped face of a reply slot that the runtime handles.
type replier interface {
	// begin moves a queued slot to running; false means the asker gave up.
	begin() bool
	// fail completes the slot with err unless it is already complete.
	fail(err error)
	// responded reports whether the slot was completed (or deferred).
	settled() bool
	// stopped returns a context, derived from parent, that ends when the
	// asker stops waiting.
	stopped(parent context.Context) context.Context
	// stoppedIfMade is the context stopped made, or nil.
	stoppedIfMade() context.Context
	// finished reports whether the outcome is set or the asker left.
	finished() bool
	// cancelled reports whether the asker stopped waiting.
	cancelled() bool
	deadline() (time.Time, bool)
	// abort cancels the slot from the runtime side (system stopping).
	abort(err error)
	// setDeferred marks the reply as deferred by the handler.
	setDeferred()
	// asking returns the actors waiting on this ask up its call chain.
	asking() []string
	// sentTo records that the request is leaving for another node: the
	// reply comes back through the returned Replier (the slot itself),
	// decoded against h.
	sentTo(ctx context.Context, h *host.Host) host.Replier
	// setWithdraw records, once the request left, what withdraws it.
	setWithdraw(sent host.Withdrawer)
}

// slot carries exactly one outcome from a handler to an asker.
type slot[R any] struct {
	mu       sync.Mutex
	state    int32
	deferred bool
	parks    bool          // the asker may wait on a waker if the ask goes to another node
	ownDl    bool          // dl is the ask timeout's, not the asker's context's
	stop     *stopper      // made on demand: cancelled when the asker gives up
	done     chan struct{} // closed when the outcome is set; made by the waiting asker (see wait)
	onDone   outcomeTo[R]  // takes the outcome instead of the asker waiting: Pipe, an ask from another node
	dl       time.Time
	val      R
	err      error
	chain    []string        // actors waiting on this ask, up the call chain
	withdraw host.Withdrawer // cancels the request on another node
	rh       *host.Host      // decodes a reply from another node (see sentTo)
	w        *waker          // what the asker waits on, if parks and the ask left (see waker_linux.go)
	// actx is the asker's context while the asker runs the handler
	// itself (see localask.go): nothing watches it, nor the deadline,
	// unless the handler looks (stopped, cancelled), which arms watch.
	actx  context.Context
	watch *askWatch
}

// outcomeTo takes a slot's outcome when nobody waits on the slot: an
// interface rather than a func, so that the reply of an ask from another
// node (remoteAsk) is a method of the slot's own allocation instead of a
// closure allocated per ask.
type outcomeTo[R any] interface{ outcome(v R, err error) }

// outcomeFunc is a func as an outcomeTo.
type outcomeFunc[R any] func(R, error)

func (f outcomeFunc[R]) outcome(v R, err error) { f(v, err) }

// stopper is a handler's view of its asker giving up: a context of
// package context, so that the contexts a handler derives attach to it
// directly instead of starting a goroutine that would read the handler's
// Context after it returned.
type stopper struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// askWatch cancels an inline ask's slot when its asker's context ends or
// its deadline passes.
type askWatch struct {
	stopCtx func() bool
	t       *time.Timer
}

func newSlot[R any](ctx context.Context) *slot[R] {
	s := &slot[R]{}
	s.dl, _ = ctx.Deadline()
	return s
}

// wait returns the channel closed when s is complete, making it if need
// be: an inline ask (localask.go) makes none unless its reply is
// deferred.
func (s *slot[R]) wait() <-chan struct{} {
	s.mu.Lock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.state == slotDone {
			close(s.done)
		}
	}
	d := s.done
	s.mu.Unlock()
	return d
}

func (s *slot[R]) begin() bool {
	s.mu.Lock()
	ok := s.state == slotQueued
	if ok {
		s.state = slotRunning
	}
	s.mu.Unlock()
	return ok
}

// complete sets the outcome; false means it was already set or cancelled.
func (s *slot[R]) complete(v R, err error) bool {
	s.mu.Lock()
	if s.state == slotDone || s.state == slotCancelled {
		s.mu.Unlock()
		return false
	}
	if s.actx != nil && s.givenUpLocked() {
		// An asker waiting on its own would have stopped by now.
		s.cancelLocked()
		s.mu.Unlock()
		return false
	}
	s.state = slotDone
	s.val, s.err = v, err
	done := s.done
	s.mu.Unlock()
	s.finish(v, err, done)
	return true
}

// finish hands the outcome on; done is s.done as read with the outcome
// set, under s.mu.
func (s *slot[R]) finish(v R, err error, done chan struct{}) {
	if s.onDone != nil {
		s.onDone.outcome(v, err)
		return
	}
	if done != nil {
		close(done)
	}
	if s.w != nil {
		s.w.wake()
	}
}

func (s *slot[R]) fail(err error) {
	var zero R
	s.complete(zero, err)
}

func (s *slot[R]) settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == slotDone || s.state == slotCancelled || s.deferred
}

// outcomer is what a waker's waiter looks at: a slot, without the
// channel that waiting on its own takes.
type outcomer interface{ outcomeSet() bool }

// outcomeSet reports whether the outcome is set: once true, val and err
// may be read without s.mu.
func (s *slot[R]) outcomeSet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == slotDone
}

func (s *slot[R]) finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == slotDone || s.state == slotCancelled
}

func (s *slot[R]) stopped(parent context.Context) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		ctx, cancel := context.WithCancel(parent)
		s.stop = &stopper{ctx: ctx, cancel: cancel}
		if s.state == slotCancelled {
			cancel()
		} else if s.actx != nil {
			s.watchLocked()
		}
	}
	return s.stop.ctx
}

func (s *slot[R]) stoppedIfMade() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		return nil
	}
	return s.stop.ctx
}

func (s *slot[R]) cancelled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.actx != nil && (s.state == slotQueued || s.state == slotRunning) && s.givenUpLocked() {
		s.cancelLocked()
	}
	return s.state == slotCancelled
}

// givenUpLocked reports, for an inline ask, whether its asker would have
// stopped waiting: its context ended or its deadline passed; s.mu held.
func (s *slot[R]) givenUpLocked() bool {
	// A deadline of the context ends it: only the ask timeout's is read
	// against the clock (time.Until reads only the monotonic one).
	return s.actx.Err() != nil || s.ownDl && time.Until(s.dl) <= 0
}

// watchLocked makes the end of an inline ask's context or its deadline
// cancel s, as the asker would if it waited; s.mu held. Armed only when
// the handler looks at its context's Done: most handlers never do.
func (s *slot[R]) watchLocked() {
	w := &askWatch{}
	if s.actx.Done() != nil {
		w.stopCtx = context.AfterFunc(s.actx, func() { s.cancel() })
	}
	if !s.dl.IsZero() {
		w.t = time.AfterFunc(time.Until(s.dl), func() { s.cancel() })
	}
	s.watch = w
}

// endInline ends the inline run of s: the asker waits on its own again
// (a deferred reply) or takes the outcome. It returns the slot's state.
func (s *slot[R]) endInline() int32 {
	s.mu.Lock()
	w := s.watch
	s.actx, s.watch = nil, nil
	st := s.state
	s.mu.Unlock()
	if w != nil {
		if w.stopCtx != nil {
			w.stopCtx()
		}
		if w.t != nil {
			w.t.Stop()
		}
	}
	return st
}

func (s *slot[R]) deadline() (time.Time, bool) { return s.dl, !s.dl.IsZero() }

// cancel is the asker giving up. It reports false when the outcome was
// already set, in which case the asker must take it.
func (s *slot[R]) cancel() bool {
	s.mu.Lock()
	switch s.state {
	case slotDone:
		s.mu.Unlock()
		return false
	case slotCancelled:
		s.mu.Unlock()
		return true
	}
	s.cancelLocked()
	withdraw := s.withdraw
	s.mu.Unlock()
	if withdraw != nil {
		withdraw.Withdraw()
	}
	return true
}

// cancelLocked moves s, not complete, to cancelled; s.mu held.
func (s *slot[R]) cancelLocked() {
	s.state = slotCancelled
	if s.stop != nil {
		s.stop.cancel()
	}
}

func (s *slot[R]) setDeferred() {
	s.mu.Lock()
	s.deferred = true
	s.mu.Unlock()
}

func (s *slot[R]) asking() []string { return s.chain }

func (s *slot[R]) sentTo(ctx context.Context, h *host.Host) host.Replier {
	if s.parks && s.onDone == nil {
		// Armed before the request is written (see waker.arm). The
		// poller's deadline is the ask timeout's only: a deadline of
		// ctx ends ctx, which the waker watches.
		if w := getWaker(); w != nil {
			var dl time.Time
			if s.ownDl {
				dl = s.dl
			}
			w.arm(ctx, dl)
			s.w = w
		}
	}
	s.rh = h
	return s
}

// Reply implements host.Replier: the outcome of an ask sent to another
// node.
func (s *slot[R]) Reply(body []byte, err error) {
	var v R
	if err == nil {
		if derr := codec.DecodeReply(s.rh, body, &v); derr != nil {
			err = fmt.Errorf("%w: reply %T: %w", ErrUndecodable, v, derr)
		}
	}
	s.complete(v, err)
}

// Withdraw implements host.Withdrawer for an ask from another node: it
// cancels the slot.
func (s *slot[R]) Withdraw() { s.cancel() }

// setWithdraw implements replier: a method rather than a callback that
// sentTo returns, which cost an allocation per ask.
func (s *slot[R]) setWithdraw(sent host.Withdrawer) {
	s.mu.Lock()
	if s.state == slotCancelled {
		s.mu.Unlock()
		sent.Withdraw()
		return
	}
	s.withdraw = sent
	s.mu.Unlock()
}

func (s *slot[R]) abort(err error) {
	s.mu.Lock()
	if s.state == slotDone || s.state == slotCancelled {
		s.mu.Unlock()
		return
	}
	s.state = slotDone
	s.err = err
	if s.stop != nil {
		s.stop.cancel()
	}
	done := s.done
	s.mu.Unlock()
	var zero R
	s.finish(zero, err, done)
}
