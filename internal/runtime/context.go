package runtime

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/internal/host"
)

// Context is what a handler gets with each message: the actor's identity,
// its state, its timers and the system. It is a context.Context that is
// cancelled when the asker of the current message stops waiting or when
// the system's Close deadline passes. A Context is valid only inside the
// handler call it was passed to (the runtime reuses it for other
// messages): contexts derived from it (WithTimeout, WithCancel,
// AfterFunc) must be cancelled or stopped before the handler returns,
// with defer as usual, and work that outlives the handler needs a context
// of its own.
type Context[S, M, C any] struct {
	Base
	cell    *cell[S, M, C]
	slot    replier // the current message's reply slot; nil for tells
	release bool
	self    Ref[M] // made on first use; the Context lives as long as its cell's goroutine
	user    C      // the typed API's context wrapping this one; handlers get its address

	// A durable kind's message (see durable.go): dirty, the state or
	// timers changed since the last commit; confirmed, this node's
	// ownership was confirmed during the message; deleted, Delete was
	// called, and erased, its tombstone met the level; lost, why a commit
	// failed; startErr, why the activation could not start, and
	// unreached, that the store could not be reached for it. gateMu
	// serialises commits.
	dirty, confirmed, deleted, erased, unreached bool
	lost, startErr                               error
	gateMu                                       sync.Mutex
	// keyed is the keyed ask being handled, until its answer is kept
	// (see continuity.go); kept, the answer a keyed ask gets instead, or
	// keptErr, why it gets none (a conflict).
	keyed   *keyedAsk
	kept    *retained
	keptErr error
	// attempt is the execution of the message being handled, from 1 (see
	// Attempt).
	attempt int
	// fired is the one-shot timer that sent the message being handled,
	// when that message activates the key: the activation drops the
	// timer from what it loads (see handledTimer).
	fired *firedTimer[M]
}

// Base is the part of a run's context that Tell and Ask find through the
// context they are given (hand-off, inline relief): the typed API's
// context embeds a pointer to it, since only this package names its
// methods.
type Base struct {
	tells   *atomic.Bool            // the cell's: see cell.tells
	run     *atomic.Pointer[runner] // the cell's: see cell.run
	relieve func()                  // an inline run's (see inline.go); nil otherwise
	gate    committer               // the run's Context when its kind is durable; nil otherwise
	// trace is the trace context of the message being handled (see
	// trace.go), which the handler's sends carry on; nil for none.
	trace *host.Trace
}

// setCell points c at cl, the cell its next run is of.
func (c *Context[S, M, C]) setCell(cl *cell[S, M, C]) {
	c.cell = cl
	c.tells, c.run = &cl.tells, &cl.run
	c.gate = nil
	if cl.durable() {
		c.gate = c
	}
}

// Self returns the ref of this actor.
func (c *Context[S, M, C]) Self() Ref[M] {
	if c.self.to == nil {
		c.self = c.cell.k.ref(c.cell.key)
	}
	return c.self
}

// Key returns this actor's key.
func (c *Context[S, M, C]) Key() string { return c.cell.key }

// System returns a handle on the system hosting this actor.
func (c *Context[S, M, C]) System() Handle { return Handle{h: c.cell.k.h} }

// Member returns the address of the cluster member running this
// handler; "" in a standalone system.
func (c *Context[S, M, C]) Member() string { return c.cell.k.h.Member }

// Logger returns the system's logger with this actor's identity
// attached, and the request id while handling an ask.
func (c *Context[S, M, C]) Logger() *slog.Logger {
	if id := c.RequestID(); id != "" {
		return c.cell.k.h.Logger.With("actor", c.cell.k.def.Name, "key", c.cell.key, "request_id", id)
	}
	return c.cell.k.h.Logger.With("actor", c.cell.k.def.Name, "key", c.cell.key)
}

// RequestID returns the request id of the ask being handled; "" while
// handling a tell or a timer.
func (c *Context[S, M, C]) RequestID() string {
	if c.slot == nil {
		return ""
	}
	return c.slot.requestID().String()
}

// Attempt returns which execution of its request the message being
// handled is, from 1: more only for a keyed ask under strict durability
// whose earlier executions were admitted and never answered (their owner
// died or lost the key mid-handler), so that their effects outside the
// actor's state may have happened.
func (c *Context[S, M, C]) Attempt() int { return max(c.attempt, 1) }

// State returns the actor's current state. Treat it as a value: to change
// it, build a new value and SetState it (see the package doc on state).
func (c *Context[S, M, C]) State() S { return c.cell.state }

// SetState replaces the state. The last completed SetState or Update is
// what the actor restarts from after a failure; a durable kind's is what
// the store keeps.
func (c *Context[S, M, C]) SetState(s S) { c.cell.state, c.dirty = s, true }

// Update replaces the state with f(state).
func (c *Context[S, M, C]) Update(f func(S) S) { c.cell.state, c.dirty = f(c.cell.state), true }

// Delete ends the key for good once the current message is handled: as
// Release, and a durable kind's stored state is replaced by a tombstone,
// so that the key's next message starts from WithInit's state.
func (c *Context[S, M, C]) Delete() {
	if c.cell.durable() {
		c.deleted = true
		return
	}
	c.release = true
}

// Become makes h handle the following messages, keeping the state. A
// restart or a new activation goes back to the definition's handler.
func (c *Context[S, M, C]) Become(h Handler[S, M, C]) { c.cell.behavior = h }

// Release ends this activation once the current message is handled: its
// timers stop, a running body is cancelled, its state is dropped. A later
// message starts a fresh activation.
func (c *Context[S, M, C]) Release() { c.release = true }

// After sends msg to this actor once, after d. A timer with the same name
// is replaced.
func (c *Context[S, M, C]) After(name string, d time.Duration, msg M) {
	c.cell.setTimer(name, d, msg, false)
	c.dirty = true
}

// Every sends msg to this actor every d until cancelled. A timer with the
// same name is replaced. A key with live timers does not idle out, but a
// durable key whose timers are stored as they stand (timersSavedLocked).
func (c *Context[S, M, C]) Every(name string, d time.Duration, msg M) {
	c.cell.setTimer(name, d, msg, true)
	c.dirty = true
}

// CancelTimer stops the named timer; it reports whether one was live.
func (c *Context[S, M, C]) CancelTimer(name string) bool {
	ok := c.cell.cancelTimer(name)
	c.dirty = c.dirty || ok
	return ok
}

// Deadline implements context.Context: the asker's deadline, if any.
func (c *Context[S, M, C]) Deadline() (time.Time, bool) {
	if c.slot != nil {
		return c.slot.deadline()
	}
	return time.Time{}, false
}

// Done implements context.Context.
func (c *Context[S, M, C]) Done() <-chan struct{} {
	if c.cell == nil {
		return spent // kept past its handler's return
	}
	if c.slot != nil {
		return c.slot.stopped(c.cell.k.h.HardCtx()).Done()
	}
	return c.cell.k.h.HardStop()
}

// spent is the Done of a Context read after its handler returned (package
// context may, for a context derived from it and not cancelled): the run
// it stood for is over.
var spent = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Err implements context.Context.
func (c *Context[S, M, C]) Err() error {
	if c.cell == nil {
		return context.Canceled
	}
	if c.slot != nil && c.slot.cancelled() {
		return context.Canceled
	}
	select {
	case <-c.cell.k.h.HardStop():
		return context.Canceled
	default:
		return nil
	}
}

// Value implements context.Context. It carries the system, so refs decoded
// from messages can be used with Tell and Ask inside handlers.
func (c *Context[S, M, C]) Value(key any) any {
	if c.cell == nil {
		return nil
	}
	switch key.(type) {
	case hostKey:
		return c.cell.k.h
	case handlerKey:
		return c
	case traceKey:
		if c.trace == nil {
			return nil // not a nil *host.Trace
		}
		return c.trace
	case requestIDKey:
		// The asks this handler makes carry the id of the ask it
		// handles: one request, one id, across hops.
		if c.slot == nil {
			return nil
		}
		return c.slot.requestID()
	case chainKey:
		// An ask from this handler waits on this actor and on whoever
		// waits on the message it is handling.
		self := c.cell.k.def.Name + "/" + c.cell.key
		if c.slot == nil {
			return []string{self}
		}
		up := c.slot.asking()
		return append(up[:len(up):len(up)], self)
	}
	// Package context finds the context Done came from, and attaches
	// the contexts derived from this one to it.
	if c.slot != nil {
		if x := c.slot.stoppedIfMade(); x != nil {
			return x.Value(key)
		}
		return nil
	}
	return c.cell.k.h.HardCtx().Value(key)
}
