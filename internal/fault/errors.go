package fault

import (
	"errors"
	"fmt"
	"strings"
)

// The sentinels; package actor documents each under the same name.
var (
	ErrMailboxFull       = errors.New("troupe: mailbox full")
	ErrSystemClosed      = errors.New("troupe: system closed")
	ErrUnknownActor      = errors.New("troupe: unknown actor type")
	ErrActorFailed       = errors.New("troupe: actor failed")
	ErrNilRef            = errors.New("troupe: nil ref")
	ErrInvalidRef        = errors.New("troupe: invalid ref")
	ErrNoReply           = errors.New("troupe: handler did not reply")
	ErrInvalidDefinition = errors.New("troupe: invalid actor definition")
	ErrUnavailable       = errors.New("troupe: actor unavailable")
	ErrAskCycle          = errors.New("troupe: ask cycle")
	ErrWrongReply        = errors.New("troupe: reply does not match the request being handled")
	ErrUndecodable       = errors.New("troupe: undecodable message")
	ErrMessageTooLarge   = errors.New("troupe: message exceeds the message limit")
	ErrInvalidRequestID  = errors.New("troupe: invalid request id")
	ErrOutcomeUnknown    = errors.New("troupe: outcome unknown")

	ErrInvalidTraceContext = errors.New("troupe: invalid trace context")

	ErrInvalidIdempotencyKey  = errors.New("troupe: invalid idempotency key")
	ErrIdempotencyConflict    = errors.New("troupe: idempotency key reused for another request")
	ErrIdempotencyUnsupported = errors.New("troupe: idempotency keys need a definition that keeps its state")
	ErrNotAdmitted            = errors.New("troupe: request not admitted: its durability could not be met, and it did not run")
	ErrInProgress             = errors.New("troupe: request in progress")
)

// OutcomeUnknown wraps ErrOutcomeUnknown and ErrUnavailable with a
// reason: a request that may or may not have run, which the runtime did
// not run again.
func OutcomeUnknown(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrOutcomeUnknown, ErrUnavailable, fmt.Sprintf(format, args...))
}

// FailedError is the runtime's form of actor.FailedError.
type FailedError struct {
	Member    string
	Actor     string
	Cause     error
	Panic     bool
	RequestID string
}

func (e *FailedError) Error() string { return FailedText(e.Actor, e.RequestID, e.Cause) }

// FailedText is the text of a FailedError, the runtime's and actor's.
func FailedText(actor, requestID string, cause error) string {
	if requestID == "" {
		return fmt.Sprintf("troupe: actor %s failed: %v", actor, cause)
	}
	return fmt.Sprintf("troupe: actor %s failed (request %s): %v", actor, requestID, cause)
}

// RequestError is the runtime's form of actor.RequestError: an ask's
// failure on the asker's side, naming the ask's request id.
type RequestError struct {
	RequestID string
	Err       error
}

func (e *RequestError) Error() string { return RequestText(e.RequestID, e.Err) }

func (e *RequestError) Unwrap() error { return e.Err }

// RequestText is the text of a RequestError, the runtime's and actor's.
func RequestText(requestID string, err error) string {
	return fmt.Sprintf("%v (request %s)", err, requestID)
}

// Unwrap lets errors.Is find both ErrActorFailed and the cause.
func (e *FailedError) Unwrap() []error { return []error{ErrActorFailed, e.Cause} }

// PanicError is the runtime's form of actor.PanicError.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// CycleError is the runtime's form of actor.CycleError.
type CycleError struct {
	Chain []string
}

func (e *CycleError) Error() string {
	return fmt.Sprintf("troupe: ask cycle: %s", strings.Join(e.Chain, " -> "))
}

// Is makes errors.Is(err, ErrAskCycle) hold.
func (e *CycleError) Is(target error) bool { return target == ErrAskCycle }

// DefinitionError is the runtime's form of actor.DefinitionError.
type DefinitionError struct {
	Definition string
	Field      string
	Problem    string
}

func (e *DefinitionError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("troupe: actor definition %q: %s", e.Definition, e.Problem)
	}
	return fmt.Sprintf("troupe: actor definition %q: %s: %s", e.Definition, e.Field, e.Problem)
}

// Is makes errors.Is(err, ErrInvalidDefinition) hold.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// DeclaredError is a definition's declared error in the form that
// crosses nodes: the name it was declared under, its msgpack body (empty
// for a sentinel) and the text of the error the handler answered with
// (a wrapper's, when it wrapped the declared error). The asker's runtime
// turns it back into the declared value.
type DeclaredError struct {
	Name string
	Body []byte
	Text string
}

func (e *DeclaredError) Error() string { return e.Text }
