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
	// settled reports whether the slot was completed (or deferred).
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
	// requestID returns the ask's request id, in the slot (no copy, no
	// boxing: a handler's Context hands it to the asks it makes).
	requestID() *host.RequestID
	// sentTo records that the request is leaving for another node: the
	// reply comes back through the returned Replier (the slot itself),
	// decoded against h.
	sentTo(h *host.Host, errs *codec.Errors) host.Replier
	// setWithdraw records, once the request left, what withdraws it.
	setWithdraw(sent host.Withdrawer)
	// idempotencyKey is the ask's idempotency key, "" for none.
	idempotencyKey() string
	// replay answers with an answer kept for a keyed ask: the encoded
	// reply, or err (see continuity.go).
	replay(h *host.Host, errs *codec.Errors, body []byte, err error)
	// trace returns the message's trace context, nil for none.
	trace() *host.Trace
}

// slot carries exactly one outcome from a handler to an asker.
type slot[R any] struct {
	mu       sync.Mutex
	state    int32
	deferred bool
	stop     *stopper      // made on demand: cancelled when the asker gives up
	done     chan struct{} // gets one token when the outcome is set or the ask timeout expires s; nil when onDone takes it
	onDone   outcomeTo[R]  // takes the outcome instead of the asker waiting: Pipe, an ask from another node
	dl       time.Time
	val      R
	err      error
	chain    []string        // actors waiting on this ask, up the call chain
	rid      host.RequestID  // the ask's request id
	opt      *askOptions     // what few asks carry; nil for none
	withdraw host.Withdrawer // cancels the request on another node
	rh       *host.Host      // decodes a reply from another node (see sentTo)
	errs     *codec.Errors   // the target's declared errors, to decode them (see sentTo)
	expired  bool            // cancelled by its ask timeout (see askWaits), which sent done its token
	wait     askWait         // its entry in the kind's askWaits, while its asker waits
}

// askOptions is what few asks carry, beside their slot: a slot with
// them inline would cost every ask more memory.
type askOptions struct {
	idem string      // the ask's idempotency key, "" for none
	tr   *host.Trace // the ask's trace context, nil for none
}

// withOptions returns the options of an ask with idempotency key idem
// and trace context tr: nil when it has neither.
func withOptions(idem string, tr *host.Trace) *askOptions {
	if idem == "" && tr == nil {
		return nil
	}
	return &askOptions{idem: idem, tr: tr}
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

// newSlot returns the slot of an ask whose asker waits on done (empty,
// with room for one token), with ctx's deadline if it has one.
func newSlot[R any](ctx context.Context, done chan struct{}) *slot[R] {
	s := &slot[R]{done: done}
	s.dl, _ = ctx.Deadline()
	return s
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
		done <- struct{}{} // never blocks: the only token (see askWaits.doneChan)
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
	return s.state == slotCancelled
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

// expire is the ask timeout ending the wait of s's asker (see askWaits):
// s is cancelled, as by the asker, and the asker woken with done's token.
func (s *slot[R]) expire() {
	s.mu.Lock()
	if s.state == slotDone || s.state == slotCancelled {
		s.mu.Unlock()
		return
	}
	s.cancelLocked()
	s.expired = true
	withdraw, done := s.withdraw, s.done
	s.mu.Unlock()
	if withdraw != nil {
		withdraw.Withdraw()
	}
	done <- struct{}{}
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

func (s *slot[R]) requestID() *host.RequestID { return &s.rid }

func (s *slot[R]) idempotencyKey() string {
	if s.opt == nil {
		return ""
	}
	return s.opt.idem
}

func (s *slot[R]) trace() *host.Trace {
	if s.opt == nil {
		return nil
	}
	return s.opt.tr
}

func (s *slot[R]) sentTo(h *host.Host, errs *codec.Errors) host.Replier {
	s.rh, s.errs = h, errs
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
	} else if de, ok := err.(*DeclaredError); ok {
		err = s.errs.Decode(s.rh, de)
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
