package actor

import (
	"context"
	"fmt"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/runtime"
)

// TraceContext is a W3C trace context (https://www.w3.org/TR/trace-context/):
// the values of the traceparent and tracestate headers. The zero
// TraceContext is none.
type TraceContext struct {
	// Parent is the traceparent: "00-" then a 32-hex-digit trace id, a
	// 16-hex-digit parent id and 2 hex digits of flags, separated by
	// dashes, lower-case, neither id all zeros. A later version than 00
	// is accepted (and carried as it is) when it starts so; version ff
	// is not. At most 256 bytes.
	Parent string
	// State is the tracestate, "" for none: at most 512 bytes and 32
	// comma-separated key=value members, as the specification spells
	// them.
	State string
}

// IsZero reports whether t is none.
func (t TraceContext) IsZero() bool { return t == TraceContext{} }

// Validate reports why t cannot travel with a message: an error wrapping
// ErrInvalidTraceContext that names the field and the problem, or nil.
// The zero TraceContext is valid (it carries none); a State without a
// Parent is not.
func (t TraceContext) Validate() error {
	if t.IsZero() {
		return nil
	}
	if why := host.ValidTrace(host.Trace(t)); why != "" {
		return fmt.Errorf("%w: %s", ErrInvalidTraceContext, why)
	}
	return nil
}

// WithTraceContext returns ctx whose tells and asks (and those of
// contexts derived from it) carry t to their handlers, on this member,
// another one, or from a client: the handler reads it with
// Context.TraceContext or TraceContextFrom, and the tells and asks it
// makes with its Context carry it on. The zero TraceContext makes them
// carry none, also from a handler. A t that Validate refuses makes those
// tells and asks fail, unsent, with ErrInvalidTraceContext: validate a
// value from outside (an HTTP header) first, and drop it if invalid, as
// the specification asks a receiver to.
func WithTraceContext(ctx context.Context, t TraceContext) context.Context {
	return runtime.WithTrace(ctx, host.Trace(t))
}

// TraceContextFrom returns the trace context that tells and asks made
// with ctx carry: the one WithTraceContext attached, or, in a handler
// (its Context or a context derived from it), that of the message being
// handled, or the one the system's Tracer gave it; the zero TraceContext
// for none.
func TraceContextFrom(ctx context.Context) TraceContext {
	return TraceContext(runtime.TraceOf(ctx))
}

// Handling describes the message an actor is about to handle, for a
// Tracer.
type Handling struct {
	Type string // the actor type: its definition's name
	Key  string // the actor's key
	Ask  bool   // an ask (a reply is expected), else a tell or a timer's message
}

// A Tracer sees every message an actor handles, so that an adapter
// outside Troupe (OpenTelemetry, say) can make a span for each: set it in
// system.Config.Tracer.
//
// Handle is called on the actor's goroutine just before the handler
// runs, with ctx carrying the message's trace context (TraceContextFrom;
// the zero TraceContext when it came without one) and m describing it.
// It returns the trace context the handler runs under, typically the
// span's own (the message's trace id, the span's id as parent id): the
// handler's Context reports it and its tells and asks carry it on. The
// zero TraceContext keeps the message's, and so does one Validate
// refuses. end, unless nil, is called once the handler has returned,
// on the same goroutine, with its error: nil, a declared error (an
// answer), or the failure, a panic's included.
//
// Handle must be fast and must not block: it runs for every message, in
// line with the handlers. It may run on many goroutines at once (one per
// busy actor). ctx is valid only until end is called. Messages answered
// without running the handler (a kept idempotent answer, a message not
// admitted) do not call it.
type Tracer interface {
	Handle(ctx context.Context, m Handling) (t TraceContext, end func(err error))
}

// TracerFunc adapts a function to a Tracer.
type TracerFunc func(ctx context.Context, m Handling) (TraceContext, func(err error))

// Handle implements Tracer.
func (f TracerFunc) Handle(ctx context.Context, m Handling) (TraceContext, func(err error)) {
	return f(ctx, m)
}
