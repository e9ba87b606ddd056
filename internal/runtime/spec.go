package runtime

import (
	"context"
	"reflect"
	"time"
)

// Handler handles one message; C is the typed API's context, which wraps
// the runtime's Context of the run.
type Handler[S, M, C any] func(c C, msg M) error

// Spec is what the engine needs of one actor definition. Package actor
// fills it from Define and its options.
type Spec[S, M, C any] struct {
	Name    string
	Handler Handler[S, M, C]
	// Wrap makes the typed context of a run, once per loop state (not
	// per message).
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
	Codec                                    *Codec
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

// Codec encodes the messages of one definition (see codec.go).
type Codec = codec

// NewCodec returns the codec of message type M.
func NewCodec[M any]() *Codec { return newCodec[M]() }

// Register registers the concrete message types msgs of definition def.
func (c *codec) Register(def string, msgs []any) []*DefinitionError { return c.register(def, msgs) }

// Portable reports why messages of the codec cannot cross nodes, or nil.
func (c *codec) Portable() error { return c.portable() }

// Unencodable returns the path and type of the first part of t that the
// state codec cannot carry, or "".
func Unencodable(t reflect.Type, path string) (string, reflect.Type) {
	return unencodable(t, path, map[reflect.Type]bool{})
}

// unencodable returns the path and type of the first part of t that the
// state codec cannot carry: functions, channels and unsafe pointers.
func unencodable(t reflect.Type, path string, seen map[reflect.Type]bool) (string, reflect.Type) {
	if seen[t] {
		return "", nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return path, t
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return unencodable(t.Elem(), path+"[]", seen)
	case reflect.Map:
		if p, bad := unencodable(t.Key(), path+"{key}", seen); p != "" {
			return p, bad
		}
		return unencodable(t.Elem(), path+"{}", seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("msgpack") == "-" {
				continue
			}
			if p, bad := unencodable(f.Type, path+"."+f.Name, seen); p != "" {
				return p, bad
			}
		}
	}
	return "", nil
}

// DefaultAskTimeout bounds asks to types a system does not host.
const DefaultAskTimeout = 10 * time.Second
