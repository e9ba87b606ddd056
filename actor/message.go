package actor

import (
	"context"
	"fmt"

	"github.com/troupe-go/troupe/internal/runtime"
)

// Reply marks a message as a request to actors whose message type is M,
// answered with an R. Embed it in the request type:
//
//	type Get struct{ actor.Reply[CounterMsg, int] }
//
// Ask then returns an int, Respond accepts only an int, and asking an actor
// of another message type does not compile. The request type must also
// implement M, like every other message of that actor.
type Reply[M, R any] struct{}

func (Reply[M, R]) troupeRequest(M, R) {}

// Request is satisfied by the message types that embed Reply[M, R].
type Request[M, R any] interface{ troupeRequest(M, R) }

// ReadOnly marks a request whose handling changes nothing (no state, no
// message with an effect elsewhere), so that running it twice is harmless:
//
//	func (Get) ReadOnly() {}
//
// When the owner of an ask's key dies (or is replaced by a newer process
// at its address) after the request reached it and before it answered, a
// ReadOnly ask is sent again to the key's new owner; any other ask fails
// with ErrOutcomeUnknown, as it may have run. The runtime trusts the
// marker: a request marked ReadOnly that changes state can change it
// twice.
type ReadOnly interface{ ReadOnly() }

// Ask sends the request q to ref and waits for the handler's reply. When ctx
// has no deadline, the definition's ask timeout applies. If ctx ends first,
// the request is dropped if still queued, or the handler's context is
// cancelled if it is running, and the error wraps ctx's error (or
// context.DeadlineExceeded for the ask timeout). A handler that answers
// with an error its definition declares gives that error; one that fails
// gives a *FailedError wrapping ErrActorFailed.
//
// Ask returns at its deadline (or when ctx ends) whatever the handler
// does: the handler never runs on the calling goroutine, so one that
// ignores its context delays only its actor, and its late reply is
// dropped.
func Ask[M any, Q Request[M, R], R any](ctx context.Context, ref Ref[M], q Q) (R, error) {
	m, ok := any(q).(M)
	if !ok {
		var zero R
		return zero, fmt.Errorf("%w: %T does not implement the message type of %s", ErrInvalidRef, q, ref)
	}
	r, err := runtime.Ask[M, R](ctx, ref.r, m)
	if err != nil {
		return r, publicError(err)
	}
	return r, nil
}

// WithRequestID returns ctx naming id as the request id of the asks made
// with it, or with contexts derived from it: their handlers read it
// (Context.RequestID), their failures and the runtime's log lines about
// them name it. id is for correlation only, like an HTTP request id: 1 to
// 64 visible ASCII bytes, else such asks fail with ErrInvalidRequestID.
// Without it an ask gets a new id, unless ctx is a handler's Context (or
// derives from one), whose asks carry the id of the ask being handled.
func WithRequestID(ctx context.Context, id string) context.Context {
	return runtime.WithRequestID(ctx, id)
}

// WithIdempotencyKey returns ctx naming key as the idempotency key of the
// asks made with it (or with contexts derived from it): the first answer
// given under a key, with the state change that came with it, is
// committed once, and every retry gets that answer, however often it is
// sent and across the death of its owner. (A run cut off before its
// commit, by its owner's death say, leaves nothing and runs again.)
//
// The key is scoped by the definition, the actor's key and the tenant,
// if the context names one (WithTenant): the same key sent to two actors
// names two requests. The first ask with a key runs
// the handler; its answer (the reply, a declared error, a failure, or
// ErrNoReply) is kept in the actor's stored record, written with the
// state the handler changed, before the answer leaves. An ask with the
// same key and an equal request (same message type, same encoding, maps
// compared by their sorted keys) gets that answer without running the
// handler; with another request it fails with ErrIdempotencyConflict.
// When the owner of a keyed ask dies before answering, the ask is sent
// again to the new owner, which answers from what was kept or runs it if
// nothing was. A handler that defers its reply (Defer) has it kept when
// it is given (Resolve, or Fail with a declared error or a failure),
// written before it leaves: by the commit of the message being handled
// when it is given, else by a step of the actor's own, queued as a
// message is. A retry while the reply is open fails with ErrInProgress
// (try again later). A reply given after the actor was passivated, or
// never given before its owner died, is not kept: a retry fails with
// ErrOutcomeUnknown, as it does when the answer was too large to keep. A
// failure is kept as its text: a retry gets a *FailedError with that
// text, without the identity of its cause.
//
// Only definitions that keep their state (Durable, WithReplicas) keep
// answers; an ask with a key to any other fails with
// ErrIdempotencyUnsupported. Each actor keeps the answers of its last
// keyed asks for 24 hours: the last 16 to 48 in its record, written
// with its state, and the older ones in pages beside it, on the same
// replicas, up to 192 pages and 1 MiB (about 6,000 small answers); past
// that the oldest go first, and so they do past the member's bounds
// (system.Config.KeptAnswers). A retry of an answer no longer kept runs
// again.
// An actor ended with Delete keeps none. key is 1 to 255 visible ASCII
// bytes (an HTTP Idempotency-Key fits), else such asks fail with
// ErrInvalidIdempotencyKey. It is kept with the answer: do not put
// secrets in it.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return runtime.WithIdempotencyKey(ctx, key)
}

// WithTenant returns ctx naming tenant as the scope of the idempotency
// keys of the asks made with it (or with contexts derived from it), for a
// service that serves several tenants: a key is scoped by the definition,
// the actor's key and the tenant, so the same key under two tenants names
// two requests. Without it keys have no tenant; a handler's own asks do
// not carry on the tenant of the ask it handles (name it again). tenant
// is 1 to 64 visible ASCII bytes, else keyed asks fail with
// ErrInvalidIdempotencyKey; asks without a key ignore it.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return runtime.WithTenant(ctx, tenant)
}

// Respond answers the request q that the handler is handling with r. A
// reply of the wrong type does not compile. Respond after a Tell (nobody
// waits) does nothing; a second Respond to the same ask is ignored.
func Respond[S, M any, Q Request[M, R], R any](c *Context[S, M], q Q, r R) error {
	if !runtime.Respond(c.runContext, r) {
		return fmt.Errorf("%w: %T", ErrWrongReply, q)
	}
	return nil
}

// Deferred is a reply that a handler gives later, after its message has
// returned: from a piped answer, a timer or another goroutine.
type Deferred[R any] struct {
	d runtime.Deferred[R]
}

// Defer takes over the reply to the request q being handled: the ask stays
// open when the handler returns, until Resolve, Fail or the asker's
// deadline, or Close (which fails it with ErrSystemClosed). After a Tell
// it returns a Deferred whose calls do nothing.
func Defer[S, M any, Q Request[M, R], R any](c *Context[S, M], q Q) Deferred[R] {
	return Deferred[R]{runtime.Defer[S, M, Context[S, M], R](c.runContext)}
}

// Resolve answers the deferred request; it reports whether the asker
// still waited. The reply to an ask with an idempotency key is kept for
// its retries (see WithIdempotencyKey), written before the reply leaves.
func (d Deferred[R]) Resolve(r R) bool { return d.d.Resolve(r) }

// Fail answers the deferred request with err: as it is when the
// definition declares it (WithErrors), else as a failure, a *FailedError
// wrapping ErrActorFailed (the actor does not restart for it).
func (d Deferred[R]) Fail(err error) bool { return d.d.Fail(err) }

// Pipe asks ref with q without blocking the handler. When the answer (or
// the failure) arrives, wrap turns it into a message that is told to this
// actor, so the handler sees it in order with the rest of its mail; it is
// queued even when the mailbox is at its bound, since the actor asked for
// it. wrap runs on whichever goroutine completes the ask: keep it to
// building the message. The target's ask timeout bounds the wait. Pipe
// never blocks: a target with a full mailbox refuses the ask at once.
// The ask carries the request id and the trace context of the message
// being handled; the answer's message, that trace context.
func Pipe[S, M, M2 any, Q Request[M2, R], R any](c *Context[S, M], ref Ref[M2], q Q, wrap func(R, error) M) {
	m2, ok := any(q).(M2)
	var invalid error
	if !ok {
		invalid = fmt.Errorf("%w: %T does not implement the message type of %s", ErrInvalidRef, q, ref)
	}
	runtime.Pipe(c.runContext, ref.r, m2, invalid, func(r R, err error) M { return wrap(r, publicError(err)) })
}
