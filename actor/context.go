package actor

import (
	"log/slog"
	"time"

	"github.com/troupe-go/troupe/internal/runtime"
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
type Context[S, M any] struct {
	// The run's base, embedded so that a Tell or Ask given this Context
	// finds the run it comes from (hand-off, inline relief) through
	// methods only the runtime can name.
	*base
	runContext *runtime.Context[S, M, Context[S, M]]
}

type base = runtime.Base

// Self returns the ref of this actor.
func (c *Context[S, M]) Self() Ref[M] { return Ref[M]{c.runContext.Self()} }

// Key returns this actor's key.
func (c *Context[S, M]) Key() string { return c.runContext.Key() }

// System returns the system hosting this actor. Pass it to Def.Ref to
// reach any actor. Unlike the Context, it stays valid after the handler
// returns.
func (c *Context[S, M]) System() System { return c.runContext.System() }

// Member returns the address (host:port) of the cluster member running
// this handler, as system.System.Addr and cluster.Member.Addr give it;
// "" in a standalone system.
func (c *Context[S, M]) Member() string { return c.runContext.Member() }

// Logger returns the system's logger with this actor's identity
// attached, and the request id (as "request_id") while handling an ask.
func (c *Context[S, M]) Logger() *slog.Logger { return c.runContext.Logger() }

// RequestID returns the request id of the ask being handled: the one its
// asker named with WithRequestID, or the one Ask made; "" while handling
// a tell or a timer. The asks this handler makes with its Context (or a
// context derived from it) carry the same id, unless it names another.
func (c *Context[S, M]) RequestID() string { return c.runContext.RequestID() }

// TraceContext returns the trace context of the message being handled
// (see WithTraceContext), or the one the system's Tracer gave the
// handler; the zero TraceContext for none. The tells and asks this
// handler makes with its Context (or a context derived from it) carry
// it, unless their context attaches another.
func (c *Context[S, M]) TraceContext() TraceContext {
	return TraceContext(c.runContext.Trace())
}

// Attempt returns which execution of its request the message being
// handled is, from 1. It is more than 1 only for a keyed ask to an actor
// under StrictDurability whose earlier executions were admitted and never
// answered (their member died or lost the key mid-handler): their
// effects outside the actor's state (a call to another service, say) may
// have happened, and the handler may want to check before it acts again.
func (c *Context[S, M]) Attempt() int { return c.runContext.Attempt() }

// State returns the actor's current state. Treat it as a value: to change
// it, build a new value and SetState it (see the package doc on state).
func (c *Context[S, M]) State() S { return c.runContext.State() }

// SetState replaces the state. The last completed SetState or Update is
// what the actor restarts from after a failure. A Durable key's state is
// written before the handler's next output and at the end of the message
// (see Durable).
func (c *Context[S, M]) SetState(s S) { c.runContext.SetState(s) }

// Update replaces the state with f(state).
func (c *Context[S, M]) Update(f func(S) S) { c.runContext.Update(f) }

// Delete ends the key for good once the current message is handled: the
// activation ends as with Release, and a Durable key's stored state is
// replaced by a tombstone (written, like a state change, before the
// handler's outputs leave), so that the key's next message starts from
// WithInit's state and no stale replica can bring the old one back.
func (c *Context[S, M]) Delete() { c.runContext.Delete() }

// Become makes h handle the following messages, keeping the state. A
// restart or a new activation goes back to the definition's handler.
func (c *Context[S, M]) Become(h Handler[S, M]) {
	c.runContext.Become(runtime.Handler[S, M, Context[S, M]](h))
}

// Release ends this activation once the current message is handled: its
// timers stop, a running body is cancelled, its state is dropped. A later
// message starts a fresh activation. A durable actor's stored state keeps
// its timers: the member activates the key again to fire them (cancel
// them first to let it rest).
func (c *Context[S, M]) Release() { c.runContext.Release() }

// After sends msg to this actor once, after d. A timer with the same name
// is replaced. A durable actor's timers are part of its state: they
// survive restarts and a change of owner, and fire on the key's owner
// (which activates the key by itself to set them again). Its one-shot
// timer leaves the state with the commit of the message it sent, so a
// crash before then sends that message again: at least once.
func (c *Context[S, M]) After(name string, d time.Duration, msg M) {
	c.runContext.After(name, d, msg)
}

// Every sends msg to this actor every d until cancelled. A timer with the
// same name is replaced. A key with live timers does not idle out, but a
// durable one: with d at least its idle timeout, it sleeps between ticks
// and is woken for each (see Passivation in the package documentation).
func (c *Context[S, M]) Every(name string, d time.Duration, msg M) {
	c.runContext.Every(name, d, msg)
}

// CancelTimer stops the named timer; it reports whether one was live.
func (c *Context[S, M]) CancelTimer(name string) bool { return c.runContext.CancelTimer(name) }

// Deadline implements context.Context: the asker's deadline, if any.
func (c *Context[S, M]) Deadline() (time.Time, bool) { return c.runContext.Deadline() }

// Done implements context.Context.
func (c *Context[S, M]) Done() <-chan struct{} { return c.runContext.Done() }

// Err implements context.Context.
func (c *Context[S, M]) Err() error { return c.runContext.Err() }

// Value implements context.Context. It carries the system, so refs decoded
// from messages can be used with Tell and Ask inside handlers.
func (c *Context[S, M]) Value(key any) any { return c.runContext.Value(key) }
