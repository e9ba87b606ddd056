package runtime

import (
	"context"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/replication"
)

// Handler handles one message; C is the typed API's context, which wraps
// the runtime's Context of the run and lives inside it (no allocation of
// its own).
type Handler[S, M, C any] func(c *C, msg M) error

// Spec is what the engine needs of one actor definition. Package actor
// fills it from Define and its options.
type Spec[S, M, C any] struct {
	Name    string
	Handler Handler[S, M, C]
	// Wrap makes the typed context of a run, once per loop state (not
	// per message); the runtime keeps it beside the Context it wraps.
	Wrap func(*Context[S, M, C]) C
	Init func(key string) S
	Run  func(ctx context.Context, self Ref[M]) error
	// Mailbox bounds the mailbox; Refuse fails sends at the bound, else
	// they wait for room.
	Mailbox int
	Refuse  bool
	// Defaults the definition set; the Set flags say which, so that a
	// system's defaults apply to the others.
	Idle, AskTimeout, BackoffMin, BackoffMax time.Duration
	IdleSet, AskSet, BackoffSet              bool
	Pinned                                   bool
	Replicas                                 int
	// Durable keeps each key's state (and timers) in the host's Store,
	// written at Level on Replicas copies (see durable.go).
	Durable bool
	Level   replication.Level
	// Strict admits each message only once its key's write level is met
	// for it, before its handler runs (see continuity.go).
	Strict bool
	// StateFailed makes the error of a stored state that does not decode
	// (nil: a plain error), so that the typed API's StateError reaches
	// askers.
	StateFailed func(key string, err error) error
	Codec       *codec.Codec
	// Errors are the errors the handler may answer with (declared
	// errors): an answer, not a failure.
	Errors *codec.Errors
	// Panicked makes the error a panic in a handler, body or piped
	// answer's wrap is reported as (nil: a *PanicError), so that the
	// typed API's PanicError reaches observers and askers.
	Panicked func(value any, stack []byte) error
}

// panicked is the error of a panic with value v.
func (k *kind[S, M, C]) panicked(v any, stack []byte) error {
	if f := k.def.Panicked; f != nil {
		return f(v, stack)
	}
	return &PanicError{Value: v, Stack: stack}
}

// failure is the error an asker gets when the handler of key failed
// with err, an undeclared error, or panicked (err is then the error the
// runtime made of the recovered value). Panic comes from the recover, not
// from err's chain: a handler that returns the failure of an ask to an
// actor that panicked did not panic itself.
func (k *kind[S, M, C]) failure(key string, err error, panicked bool) *FailedError {
	return &FailedError{Member: k.h.Member, Actor: k.def.Name + "/" + key, Cause: err, Panic: panicked}
}

// DefaultAskTimeout bounds asks to types a system does not host.
const DefaultAskTimeout = 10 * time.Second
