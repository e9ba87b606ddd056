package runtime

import (
	"fmt"

	"github.com/troupe-go/troupe/internal/fault"
)

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
	ErrNotAdmitted            = fault.ErrNotAdmitted
	ErrInProgress             = fault.ErrInProgress
)

// errClosedWhileRunning fails an ask whose handler had started (or
// deferred its reply) when its system closed: the system closed, and the
// request may have had its effects (ErrOutcomeUnknown, which matches
// ErrUnavailable too), which an asker on another node must learn rather
// than a plain "closed" that reads as "never ran".
var errClosedWhileRunning = fmt.Errorf("%w: %w", ErrSystemClosed, fault.OutcomeUnknown("the system closed while the handler ran"))

type (
	FailedError     = fault.FailedError
	PanicError      = fault.PanicError
	CycleError      = fault.CycleError
	DefinitionError = fault.DefinitionError
	DeclaredError   = fault.DeclaredError
	RequestError    = fault.RequestError
)
