package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/vmihailenco/msgpack/v5"
)

// Ref is the engine's address of one key of one actor type: the typed
// API's Ref wraps it. The zero value's sends resolve through the context.
type Ref[M any] struct {
	to  sink[M]
	typ string
	key string
	h   uint64 // the key's hash in to's table, computed once when bound
	tok uint64 // the key's ring token, in a clustered system
}

// sink is the runtime that delivers messages to one actor type.
type sink[M any] interface {
	// deliver routes m to key: queued here, or sent to the member that
	// serves key; h and tok are the key's hash and ring token.
	deliver(ctx context.Context, key string, h, tok uint64, m M, s replier) error
	// tell is deliver without a replier, in few enough words for the
	// call to pass them all (the generic body's dictionary included) in
	// registers: Tell's path. w is the key's ring token in a cluster (0:
	// unknown), else its hash.
	tell(ctx context.Context, key string, w uint64, m M) error
	// hash is key's hash in this sink's table (0 where it has none).
	hash(key string) uint64
	// token is key's ring token (0 outside a cluster).
	token(key string) uint64
	askTimeout() time.Duration
	// waits is the list that ends asks at the ask timeout, or nil.
	waits() *askWaits
	host() *host.Host
}

// MakeRef returns the unbound ref of typ/key.
func MakeRef[M any](typ, key string) Ref[M] { return Ref[M]{typ: typ, key: key} }

// Type returns the actor type name the ref addresses.
func (r Ref[M]) Type() string { return r.typ }

// Key returns the key the ref addresses.
func (r Ref[M]) Key() string { return r.key }

// String prints the ref as type/key.
func (r Ref[M]) String() string {
	if r.typ == "" && r.key == "" && r.to == nil {
		return "<nil ref>"
	}
	return r.typ + "/" + r.key
}

// EncodeMsgpack encodes the ref as [type, key].
func (r Ref[M]) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := enc.EncodeString(r.typ); err != nil {
		return err
	}
	return enc.EncodeString(r.key)
}

// DecodeMsgpack decodes a ref encoded by EncodeMsgpack. When the decoder
// reads from a source that belongs to a system, the ref is bound to it.
func (r *Ref[M]) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n == -1 {
		*r = Ref[M]{}
		return nil
	}
	if n != 2 {
		return fmt.Errorf("troupe: decode ref: want 2 fields, got %d", n)
	}
	typ, err := dec.DecodeString()
	if err != nil {
		return err
	}
	key, err := dec.DecodeString()
	if err != nil {
		return err
	}
	*r = Ref[M]{typ: typ, key: key}
	if b, ok := dec.Buffered().(interface{ Host() *host.Host }); ok {
		if to, ok := lookupSink[M](b.Host(), typ); ok {
			r.to, r.h, r.tok = to, to.hash(key), to.token(key)
		}
	}
	return nil
}

// resolve returns r bound to the runtime that delivers it.
func (r Ref[M]) resolve(ctx context.Context) (Ref[M], error) {
	if r.to != nil {
		return r, nil
	}
	if r.typ == "" {
		return r, ErrNilRef
	}
	h, _ := ctx.Value(hostKey{}).(*host.Host)
	if h == nil {
		return r, fmt.Errorf("%w: %s is not bound to a system and the context carries none", ErrNilRef, r)
	}
	to, ok := lookupSink[M](h, r.typ)
	if !ok {
		return r, fmt.Errorf("%w: %s", ErrUnknownActor, r)
	}
	r.to, r.h, r.tok = to, to.hash(r.key), to.token(r.key)
	return r, nil
}

func lookupSink[M any](h *host.Host, typ string) (sink[M], bool) {
	k := h.Kind(typ)
	if k == nil {
		return nil, false
	}
	to, ok := k.(sink[M])
	return to, ok
}

// hostKey is the context key under which a handler's Context answers
// with its system.
type hostKey struct{}

// System is a handle on a system's runtime: the typed API's System
// embeds it, so that only the runtime's handles implement it.
type System interface{ runtimeHost() *host.Host }

// Handle implements System; system.System, client.Client and a handler's
// Context.System hold one.
type Handle struct{ h *host.Host }

// NewHandle returns the handle of h.
func NewHandle(h *host.Host) Handle { return Handle{h: h} }

func (x Handle) runtimeHost() *host.Host { return x.h }

// HostOf returns the runtime behind sys, or nil.
func HostOf(sys System) *host.Host {
	if sys == nil {
		return nil
	}
	return sys.runtimeHost()
}

// Definition is a definition a system can host; it is sealed by Sealed.
type Definition interface {
	Name() string
	instantiate(h *host.Host) host.Kind
}

// Sealed implements Definition's unexported method; a definition embeds
// it.
type Sealed struct{ inst func(h *host.Host) host.Kind }

// Seal returns a Sealed that instantiates through inst.
func Seal(inst func(h *host.Host) host.Kind) Sealed { return Sealed{inst: inst} }

func (s Sealed) instantiate(h *host.Host) host.Kind { return s.inst(h) }

// Instantiate creates d's runtime inside h.
func Instantiate(d Definition, h *host.Host) host.Kind { return d.instantiate(h) }

// RefOf returns the ref of key in h for the definition named by d.
func RefOf[S, M, C any](h *host.Host, d *Spec[S, M, C], key string) Ref[M] {
	r := Ref[M]{typ: d.Name, key: key}
	if h == nil {
		return r
	}
	k, ok := h.Kind(d.Name).(*kind[S, M, C])
	if !ok && h.Kind(d.Name) == nil && h.Remote != nil && h.RemoteOnly {
		// A client hosts nothing: it learns each definition from the
		// first ref taken, to encode its messages for the owner.
		h.Register(NewKind(h, d))
		k, ok = h.Kind(d.Name).(*kind[S, M, C])
	}
	if ok {
		r.to, r.h, r.tok = k, k.hash(key), k.token(key)
	} else {
		r.to = unknownSink[M]{h: h}
	}
	return r
}

// unknownSink answers for types a system does not host.
type unknownSink[M any] struct{ h *host.Host }

func (u unknownSink[M]) hash(string) uint64  { return 0 }
func (u unknownSink[M]) token(string) uint64 { return 0 }
func (u unknownSink[M]) deliver(context.Context, string, uint64, uint64, M, replier) error {
	return ErrUnknownActor
}
func (u unknownSink[M]) tell(context.Context, string, uint64, M) error {
	return ErrUnknownActor
}
func (u unknownSink[M]) askTimeout() time.Duration { return DefaultAskTimeout }
func (u unknownSink[M]) waits() *askWaits          { return nil }
func (u unknownSink[M]) host() *host.Host          { return u.h }
