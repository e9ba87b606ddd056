package runtime

import "github.com/troupe-go/troupe/internal/fault"

// The errors the engine reports, under the names its code uses.
var (
	ErrMailboxFull      = fault.ErrMailboxFull
	ErrActorFailed      = fault.ErrActorFailed
	ErrSystemClosed     = fault.ErrSystemClosed
	ErrUnknownActor     = fault.ErrUnknownActor
	ErrNilRef           = fault.ErrNilRef
	ErrInvalidRef       = fault.ErrInvalidRef
	ErrNoReply          = fault.ErrNoReply
	ErrWrongReply       = fault.ErrWrongReply
	ErrUndecodable      = fault.ErrUndecodable
	ErrMessageTooLarge  = fault.ErrMessageTooLarge
	ErrUnavailable      = fault.ErrUnavailable
	ErrInvalidRequestID = fault.ErrInvalidRequestID

	ErrInvalidIdempotencyKey  = fault.ErrInvalidIdempotencyKey
	ErrIdempotencyConflict    = fault.ErrIdempotencyConflict
	ErrIdempotencyUnsupported = fault.ErrIdempotencyUnsupported
)

type (
	FailedError     = fault.FailedError
	PanicError      = fault.PanicError
	CycleError      = fault.CycleError
	DefinitionError = fault.DefinitionError
	DeclaredError   = fault.DeclaredError
	RequestError    = fault.RequestError
)
