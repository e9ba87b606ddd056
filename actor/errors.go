package actor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-go/troupe/internal/fault"
)

var (
	// ErrMailboxFull reports that an actor's mailbox is at its bound and the
	// definition refuses overflow. It is temporary: the sender may retry.
	ErrMailboxFull = fault.ErrMailboxFull

	// ErrSystemClosed reports that the system no longer accepts work.
	ErrSystemClosed = fault.ErrSystemClosed

	// ErrUnknownActor reports a ref whose actor type is not registered in
	// the system that was asked to deliver it.
	ErrUnknownActor = fault.ErrUnknownActor

	// ErrActorFailed reports that the handler returned an error or
	// panicked while handling the message. The *FailedError that carries it
	// holds the cause.
	ErrActorFailed = fault.ErrActorFailed

	// ErrNilRef reports a zero Ref, or a ref used where no system can be
	// found to deliver it.
	ErrNilRef = fault.ErrNilRef

	// ErrInvalidRef reports a ref with an empty key or type name.
	ErrInvalidRef = fault.ErrInvalidRef

	// ErrNoReply reports that the handler of an ask returned without
	// responding and without deferring its reply.
	ErrNoReply = fault.ErrNoReply

	// ErrInvalidDefinition reports a definition the runtime cannot host;
	// the *DefinitionError that carries it names the definition and field.
	ErrInvalidDefinition = fault.ErrInvalidDefinition

	// ErrUnavailable reports that no member can serve the actor now: its
	// owner is down or unreachable, this node lost the majority of the
	// cluster, or the request met a node that no longer owned the key
	// twice. It is temporary. It does not mean the message was not
	// handled: an owner declared dead may have run the request before it
	// died or was cut off, so an ask that failed with it may have
	// happened (see system's package doc).
	ErrUnavailable = fault.ErrUnavailable

	// ErrOutcomeUnknown reports an ask whose owner died (or was replaced
	// by a newer process at its address) before answering: it may or may
	// not have run. Errors that carry it match ErrUnavailable too. Asks
	// whose message is ReadOnly are sent again to the new owner instead;
	// for the others the caller decides, with an idempotency key of its
	// own (client/idempotency over HTTP) if it must retry. An owner that
	// leaves in order answers what it accepted and says what it never
	// ran, which goes to the new owner; an ask it abandoned at its leave
	// timeout fails so too (see system's package doc).
	ErrOutcomeUnknown = fault.ErrOutcomeUnknown

	// ErrAskCycle reports an ask that would wait on an actor already
	// waiting, up the same call chain, for the asker: A asks B, B asks A.
	// The *CycleError that carries it lists the chain.
	ErrAskCycle = fault.ErrAskCycle

	// ErrWrongReply reports a Respond whose request is not the ask being
	// handled.
	ErrWrongReply = fault.ErrWrongReply

	// ErrUndecodable reports a message or reply that arrived from another
	// node and could not be decoded: an unregistered message type name, or
	// bytes that do not fit the type.
	ErrUndecodable = fault.ErrUndecodable

	// ErrMessageTooLarge reports a message (or a reply) whose encoding
	// exceeds the message limit of a clustered system or client
	// (system.Config.MaxMessage, client.Config.MaxMessage), wherever its
	// key lives. It is permanent: the same message fails again.
	ErrMessageTooLarge = fault.ErrMessageTooLarge

	// ErrInvalidRequestID reports an ask whose context names a request id
	// (WithRequestID) that is empty, longer than 64 bytes or not visible
	// ASCII. The ask is not sent.
	ErrInvalidRequestID = fault.ErrInvalidRequestID

	// ErrInvalidTraceContext reports a tell or an ask whose context
	// carries a trace context (WithTraceContext) that is not valid (see
	// TraceContext.Validate). The message is not sent.
	ErrInvalidTraceContext = fault.ErrInvalidTraceContext

	// ErrInvalidIdempotencyKey reports an ask whose context names an
	// idempotency key (WithIdempotencyKey) that is empty, longer than 255
	// bytes or not visible ASCII. The ask is not sent.
	ErrInvalidIdempotencyKey = fault.ErrInvalidIdempotencyKey

	// ErrIdempotencyConflict reports an ask whose idempotency key was
	// first used, on the same actor, for another request (another message
	// type or another encoding). The handler does not run. It is
	// permanent: the key names the first request for as long as its
	// answer is kept.
	ErrIdempotencyConflict = fault.ErrIdempotencyConflict

	// ErrNotAdmitted reports a message to an actor under StrictDurability
	// that could not be admitted: its key's write level could not be met
	// for it before the deadline (too few replicas answered, or the member
	// no longer owns the key). The handler did not run. It matches
	// ErrUnavailable too: retry later.
	ErrNotAdmitted = fault.ErrNotAdmitted

	// ErrInProgress reports a keyed ask (WithIdempotencyKey) whose first
	// request's handler deferred its reply (Defer), which the member that
	// holds it has not given yet. The handler does not run again: retry
	// later, and the retry gets the reply once it was given (and kept).
	// It is temporary (see Temporary).
	ErrInProgress = fault.ErrInProgress

	// ErrIdempotencyUnsupported reports an ask with an idempotency key to
	// an actor whose definition keeps no state (neither Durable nor
	// WithReplicas): there is nowhere to keep its answer. The ask is not
	// sent.
	ErrIdempotencyUnsupported = fault.ErrIdempotencyUnsupported
)

// Temporary reports whether retrying what failed with err may succeed:
// true when err matches ErrUnavailable, ErrMailboxFull, ErrInProgress,
// context.DeadlineExceeded (an ask that timed out: the handler may have
// run) or ErrSystemClosed of another node (which matches ErrUnavailable);
// false for nil and every other error, among them ErrMessageTooLarge,
// ErrUnknownActor, ErrUndecodable, ErrInvalidRef, ErrNilRef,
// ErrInvalidDefinition, ErrAskCycle, ErrNoReply, ErrWrongReply, this
// system's own ErrSystemClosed, context.Canceled (the caller gave up),
// failures (*FailedError) and the errors a definition declares. A retry
// after a deadline may run the request twice: make such requests
// idempotent.
func Temporary(err error) bool {
	if err == nil {
		return false
	}
	var fe *FailedError
	if errors.As(err, &fe) {
		return false
	}
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrMailboxFull) || errors.Is(err, ErrInProgress) || errors.Is(err, context.DeadlineExceeded)
}

// FailedError is the error an asker receives when the handler failed:
// it panicked, or returned (or Deferred.Fail gave) an error its
// definition does not declare. It is the same type on every path, local,
// from another member or through a client.
type FailedError struct {
	// Member is the address of the member that ran the handler; "" in a
	// standalone system.
	Member string
	// Actor is the ref of the actor that failed, as printed by Ref.String.
	Actor string
	// Cause is the handler's error, or a *PanicError. From another node
	// only its text arrives (with the sentinels of this package still
	// matching through errors.Is); a panic's cause is a *PanicError whose
	// Value is the panic's text and Stack is empty.
	Cause error
	// Panic reports that the handler panicked.
	Panic bool
	// RequestID is the request id of the ask that failed (see
	// WithRequestID).
	RequestID string
}

func (e *FailedError) Error() string { return fault.FailedText(e.Actor, e.RequestID, e.Cause) }

// RequestError is an ask's failure on the asker's side other than the
// handler's (a *FailedError, which has the id in its RequestID) or an
// error the definition declares (the handler's answer): the target
// unavailable, the deadline, a message too large, a full mailbox. It
// names the ask's request id and wraps the error, which errors.Is and
// errors.As find as before.
type RequestError struct {
	// RequestID is the ask's request id.
	RequestID string
	// Err is why the ask failed.
	Err error
}

func (e *RequestError) Error() string { return fault.RequestText(e.RequestID, e.Err) }

func (e *RequestError) Unwrap() error { return e.Err }

// RequestIDOf returns the request id that err, an ask's error, names:
// that of its *RequestError or *FailedError; "" when it names none.
func RequestIDOf(err error) string {
	for err != nil {
		switch e := err.(type) {
		case *RequestError:
			return e.RequestID
		case *FailedError:
			return e.RequestID
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return ""
		}
		err = u.Unwrap()
	}
	return ""
}

// Unwrap lets errors.Is find both ErrActorFailed and the cause.
func (e *FailedError) Unwrap() []error { return []error{ErrActorFailed, e.Cause} }

// PanicError is the cause recorded when a handler panics.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// StateError reports a stored state that this binary cannot read: its
// type changed in a way that does not decode (a field renamed or removed,
// another kind of value), a stored timer's message is no longer one of
// the definition's (WithMessages), or the record is damaged. The activation fails
// (and restarts after backoff, failing again) and the stored state is left
// as it is: fix the type, or Delete the key from a handler of a definition
// that decodes it.
type StateError struct {
	// Definition is the actor type's name, Key the key.
	Definition, Key string
	// Err is why the state does not decode.
	Err error
}

func (e *StateError) Error() string {
	return fmt.Sprintf("troupe: stored state of %s/%s does not decode: %v", e.Definition, e.Key, e.Err)
}

func (e *StateError) Unwrap() error { return e.Err }

// DefinitionError explains why a definition cannot be hosted.
type DefinitionError struct {
	// Definition is the actor type name.
	Definition string
	// Field names the offending option or state field, if any.
	Field string
	// Problem says what is wrong.
	Problem string
}

func (e *DefinitionError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("troupe: actor definition %q: %s", e.Definition, e.Problem)
	}
	return fmt.Sprintf("troupe: actor definition %q: %s: %s", e.Definition, e.Field, e.Problem)
}

// Is makes errors.Is(err, ErrInvalidDefinition) hold.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// CycleError is the error of an ask that would close a cycle of actors
// waiting on each other.
type CycleError struct {
	// Chain lists the actors, type/key, from the first asker to the one
	// asked again.
	Chain []string
}

func (e *CycleError) Error() string {
	return fmt.Sprintf("troupe: ask cycle: %s", strings.Join(e.Chain, " -> "))
}

// Is makes errors.Is(err, ErrAskCycle) hold.
func (e *CycleError) Is(target error) bool { return target == ErrAskCycle }

// publicError returns err with the runtime's error types replaced by
// actor's, so that errors.As finds the types this package documents.
// Sentinels are shared and need nothing.
func publicError(err error) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *fault.FailedError:
		return &FailedError{Member: e.Member, Actor: e.Actor, Cause: publicError(e.Cause), Panic: e.Panic, RequestID: e.RequestID}
	case *fault.RequestError:
		return &RequestError{RequestID: e.RequestID, Err: publicError(e.Err)}
	case *fault.PanicError:
		return &PanicError{Value: e.Value, Stack: e.Stack}
	case *fault.CycleError:
		return &CycleError{Chain: e.Chain}
	case *fault.DefinitionError:
		return &DefinitionError{Definition: e.Definition, Field: e.Field, Problem: e.Problem}
	}
	return err
}

// As lets routing carry a FailedError that a handler returned (a failed
// ask's error, passed on) to other nodes as it carries the runtime's.
func (e *FailedError) As(target any) bool {
	if t, ok := target.(**fault.FailedError); ok {
		*t = &fault.FailedError{Member: e.Member, Actor: e.Actor, Cause: e.Cause, Panic: e.Panic, RequestID: e.RequestID}
		return true
	}
	return false
}

// As lets routing carry a CycleError a handler returned to other nodes.
func (e *CycleError) As(target any) bool {
	if t, ok := target.(**fault.CycleError); ok {
		*t = &fault.CycleError{Chain: e.Chain}
		return true
	}
	return false
}

// As lets the runtime and routing recognise a handler's panic as one.
func (e *PanicError) As(target any) bool {
	if t, ok := target.(**fault.PanicError); ok {
		*t = &fault.PanicError{Value: e.Value, Stack: e.Stack}
		return true
	}
	return false
}
