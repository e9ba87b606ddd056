package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
)

// ErrInvalidTraceContext: see package actor.
var ErrInvalidTraceContext = fault.ErrInvalidTraceContext

// traceKey is the context key under which a send finds the trace
// context it carries: WithTrace's (a *namedTrace), or a handler's
// Context's (the *host.Trace of the message it handles; nil for none).
type traceKey struct{}

// mayCarryTrace reports whether ctx may carry a trace context: the
// background and TODO contexts hold no values, so a tell made with one
// (background work, benchmarks) skips the Value lookup, which costs a
// local tell about 7%. Any other context pays it (docs/architecture.md).
func mayCarryTrace(ctx context.Context) bool {
	return ctx != context.Background() && ctx != context.TODO()
}

// namedTrace is a trace context a caller attached, with why it is
// refused, if it is.
type namedTrace struct {
	t   host.Trace
	err error
}

// WithTrace returns ctx whose tells and asks (and those of contexts
// derived from it) carry t; the zero Trace makes them carry none. A t
// that is not valid (host.ValidTrace) makes them fail with
// ErrInvalidTraceContext.
func WithTrace(ctx context.Context, t host.Trace) context.Context {
	nt := &namedTrace{t: t}
	if t != (host.Trace{}) {
		if why := host.ValidTrace(t); why != "" {
			nt.err = fmt.Errorf("%w: %s", ErrInvalidTraceContext, why)
		}
	}
	return context.WithValue(ctx, traceKey{}, nt)
}

// TraceOf returns the trace context the sends made with ctx carry: the
// one WithTrace attached, or that of the message a handler whose Context
// ctx is (or derives from) handles; the zero Trace for none.
func TraceOf(ctx context.Context) host.Trace {
	switch v := ctx.Value(traceKey{}).(type) {
	case *host.Trace:
		return *v
	case *namedTrace:
		return v.t
	}
	return host.Trace{}
}

// traceOf returns the trace context a send made with ctx carries (nil:
// none), or why the one ctx names is refused.
func traceOf(ctx context.Context) (*host.Trace, error) {
	switch v := ctx.Value(traceKey{}).(type) {
	case *host.Trace:
		return v, nil
	case *namedTrace:
		if v.err != nil {
			return nil, v.err
		}
		if v.t == (host.Trace{}) {
			return nil, nil
		}
		return &v.t, nil
	}
	return nil, nil
}

// sendTrace returns the trace context a send made with ctx carries, as
// traceOf, looking at a handler's own Context without a Value lookup.
func sendTrace(ctx context.Context) (*host.Trace, error) {
	if r, ok := ctx.(handlerRun); ok {
		return r.handlerTrace(), nil
	}
	if !mayCarryTrace(ctx) {
		return nil, nil
	}
	return traceOf(ctx)
}

// handlerRun is a handler's Context, runtime's or the typed API's: a
// send given one finds the handler's output gate and trace context
// without a Value lookup.
type handlerRun interface {
	outputGated
	handlerTrace() *host.Trace
}

// Trace returns the trace context of the message being handled (or the
// one the tracer gave its handler); the zero Trace for none.
func (c *Context[S, M, C]) Trace() host.Trace {
	if c.trace == nil {
		return host.Trace{}
	}
	return *c.trace
}

// handlerTrace returns the trace context of the message the run
// handles, nil for none.
func (b *Base) handlerTrace() *host.Trace { return b.trace }

// startTrace calls the host's tracer, if any, for the message ctx is
// about to handle, and sets the handler's trace context to the one it
// returns (unless zero or invalid). It returns the function to call with
// the handler's outcome, or nil.
func (c *Context[S, M, C]) startTrace(tracer host.Tracer) func(error) {
	t, end := tracer(c, host.Handling{Type: c.cell.k.def.Name, Key: c.cell.key, Ask: c.slot != nil})
	if t != (host.Trace{}) && (c.trace == nil || t != *c.trace) && host.ValidTrace(t) == "" {
		c.trace = &t
	}
	return end
}

// tracedTell is the trace context of a tell, in its envelope's slot (see
// envelope): a replier that no asker waits on, whose methods are those of
// a tell's absent slot. The runtime asks an envelope for its ask
// (envelope.ask), so none of them runs but trace.
type tracedTell host.Trace

func (t *tracedTell) trace() *host.Trace                              { return (*host.Trace)(t) }
func (t *tracedTell) begin() bool                                     { return true }
func (t *tracedTell) fail(error)                                      {}
func (t *tracedTell) settled() bool                                   { return true }
func (t *tracedTell) stopped(parent context.Context) context.Context  { return parent }
func (t *tracedTell) stoppedIfMade() context.Context                  { return nil }
func (t *tracedTell) finished() bool                                  { return true }
func (t *tracedTell) cancelled() bool                                 { return false }
func (t *tracedTell) deadline() (time.Time, bool)                     { return time.Time{}, false }
func (t *tracedTell) abort(error)                                     {}
func (t *tracedTell) setDeferred()                                    {}
func (t *tracedTell) asking() []string                                { return nil }
func (t *tracedTell) requestID() *host.RequestID                      { return new(host.RequestID) }
func (t *tracedTell) sentTo(*host.Host, *codec.Errors) host.Replier   { return nil }
func (t *tracedTell) setWithdraw(host.Withdrawer)                     {}
func (t *tracedTell) idempotencyKey() string                          { return "" }
func (t *tracedTell) replay(*host.Host, *codec.Errors, []byte, error) {}
