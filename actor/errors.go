package actor

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrMailboxFull reports that an actor's mailbox is at its bound and the
	// definition refuses overflow. It is temporary: the sender may retry.
	ErrMailboxFull = errors.New("troupe: mailbox full")

	// ErrSystemClosed reports that the system no longer accepts work.
	ErrSystemClosed = errors.New("troupe: system closed")

	// ErrUnknownActor reports a ref whose actor type is not registered in
	// the system that was asked to deliver it.
	ErrUnknownActor = errors.New("troupe: unknown actor type")

	// ErrActorFailed reports that the handler returned an error or
	// panicked while handling the message. The *FailedError that carries it
	// holds the cause.
	ErrActorFailed = errors.New("troupe: actor failed")

	// ErrNilRef reports a zero Ref, or a ref used where no system can be
	// found to deliver it.
	ErrNilRef = errors.New("troupe: nil ref")

	// ErrInvalidRef reports a ref with an empty key or type name.
	ErrInvalidRef = errors.New("troupe: invalid ref")

	// ErrNoReply reports that the handler of an ask returned without
	// responding and without deferring its reply.
	ErrNoReply = errors.New("troupe: handler did not reply")

	// ErrInvalidDefinition reports a definition the runtime cannot host;
	// the *DefinitionError that carries it names the definition and field.
	ErrInvalidDefinition = errors.New("troupe: invalid actor definition")

	// ErrUnavailable reports that no member can serve the actor now: its
	// owner is down or unreachable, this node lost the majority of the
	// cluster, or the request met a node that no longer owned the key
	// twice. It is temporary. It does not mean the message was not
	// handled: an owner declared dead may have run the request before it
	// died or was cut off, so an ask that failed with it may have
	// happened (see system's package doc).
	ErrUnavailable = errors.New("troupe: actor unavailable")

	// ErrAskCycle reports an ask that would wait on an actor already
	// waiting, up the same call chain, for the asker: A asks B, B asks A.
	// The *CycleError that carries it lists the chain.
	ErrAskCycle = errors.New("troupe: ask cycle")

	// ErrWrongReply reports a Respond whose request is not the ask being
	// handled.
	ErrWrongReply = errors.New("troupe: reply does not match the request being handled")
)

// FailedError is the error an asker receives when the handler failed.
type FailedError struct {
	// Actor is the ref of the actor that failed, as printed by Ref.String.
	Actor string
	// Cause is the handler's error, or a *PanicError.
	Cause error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("troupe: actor %s failed: %v", e.Actor, e.Cause)
}

// Unwrap lets errors.Is find both ErrActorFailed and the cause.
func (e *FailedError) Unwrap() []error { return []error{ErrActorFailed, e.Cause} }

// PanicError is the cause recorded when a handler panics.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

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
