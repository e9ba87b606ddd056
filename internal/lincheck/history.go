package lincheck

import (
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// History records the operations of concurrent clients, timed from when
// NewHistory made it.
type History[K comparable] struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewHistory returns an empty history whose clock starts now.
func NewHistory[K comparable]() *History[K] {
	return &History[K]{start: time.Now()}
}

// Now is the time to record as an operation's call or return: nanoseconds
// since the history began.
func (h *History[K]) Now() int64 { return time.Since(h.start).Nanoseconds() }

// Add records an operation called at call that returned at ret (Pending
// when its outcome is unknown). Each operation counts as its own client:
// porcupine wants a client's operations one after another, and a client
// that gave up on one (Pending) goes on with the next.
func (h *History[K]) Add(in Input[K], out Output, call, ret int64) {
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: len(h.ops), Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

// Ops returns a copy of the operations recorded so far.
func (h *History[K]) Ops() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}
