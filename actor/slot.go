package actor

import (
	"context"
	"fmt"
	"sync"
	"time"

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
	// stopped is closed when the asker stops waiting.
	stopped() <-chan struct{}
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
	// sentTo records that the request left for another node: the reply
	// comes back through the returned callback, and cancel withdraws it.
	sentTo(h *host.Host) (done func(body []byte, err error), setCancel func(cancel func()))
}

// slot carries exactly one outcome from a handler to an asker.
type slot[R any] struct {
	mu       sync.Mutex
	state    int32
	deferred bool
	parks    bool          // the asker may wait on a waker if the ask goes to another node
	stop     chan struct{} // made on demand: closed when the asker gives up
	done     chan struct{} // closed when the outcome is set (unless onDone)
	onDone   func(R, error)
	dl       time.Time
	val      R
	err      error
	chain    []string // actors waiting on this ask, up the call chain
	withdraw func()   // cancels the request on another node
	w        *waker   // what the asker waits on, if parks and the ask left (see waker_linux.go)
}

func newSlot[R any](ctx context.Context) *slot[R] {
	s := &slot[R]{done: make(chan struct{})}
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
	s.mu.Unlock()
	s.finish(v, err)
	return true
}

func (s *slot[R]) finish(v R, err error) {
	if s.onDone != nil {
		s.onDone(v, err)
		return
	}
	close(s.done)
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

func (s *slot[R]) finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == slotDone || s.state == slotCancelled
}

func (s *slot[R]) stopped() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		s.stop = make(chan struct{})
		if s.state == slotCancelled {
			close(s.stop)
		}
	}
	return s.stop
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
	s.state = slotCancelled
	if s.stop != nil {
		close(s.stop)
	}
	withdraw := s.withdraw
	s.mu.Unlock()
	if withdraw != nil {
		withdraw()
	}
	return true
}

func (s *slot[R]) setDeferred() {
	s.mu.Lock()
	s.deferred = true
	s.mu.Unlock()
}

func (s *slot[R]) asking() []string { return s.chain }

func (s *slot[R]) sentTo(h *host.Host) (func([]byte, error), func(func())) {
	if s.parks && s.onDone == nil {
		s.w = getWaker()
	}
	done := func(body []byte, err error) {
		var v R
		if err == nil {
			if derr := decodeBound(h, body, &v); derr != nil {
				err = fmt.Errorf("%w: reply %T: %w", ErrUndecodable, v, derr)
			}
		}
		s.complete(v, err)
	}
	setCancel := func(cancel func()) {
		s.mu.Lock()
		if s.state == slotCancelled {
			s.mu.Unlock()
			cancel()
			return
		}
		s.withdraw = cancel
		s.mu.Unlock()
	}
	return done, setCancel
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
		close(s.stop)
	}
	s.mu.Unlock()
	var zero R
	s.finish(zero, err)
}
