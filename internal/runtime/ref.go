package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/replication"
	"github.com/vmihailenco/msgpack/v5"
)

// Ref is the engine's address of one key of one actor type: the typed
// API's Ref wraps it. The zero value's sends resolve through the context.
//
// A Ref is kept to four words: Go copies a larger struct through memory
// at every call that takes it by value (Tell, Ask, and whatever users
// pass refs to), which cost a local tell 10 to 15 ns.
type Ref[M any] struct {
	to  *target[M] // the runtime of the type, shared by its refs; nil: bound to no system
	key string     // the key; unbound, the type's name followed by the key
	w   uint64     // the key's ring token in a cluster, else its hash; unbound, the name's length
}

// target is what the refs of one type in one system share.
type target[M any] struct {
	sink      sink[M]
	typ       string
	clustered bool // a ref's w is the key's ring token, not its hash
	// stores is set when the system stores actor state: a Tell through a
	// context derived from a durable handler's looks for that handler.
	stores bool
	// keeps is set when the type keeps its state (durable or
	// replicated), wherever it runs (a client stores nothing, the members
	// do): only then may its asks carry an idempotency key.
	keeps bool
	// met counts the tells and asks made through the refs; nil when the
	// system has no metrics.
	met *host.TypeMeter
}

// hashes returns the key's hash and ring token as far as the ref keeps
// them (0: unknown); r is bound.
func (r Ref[M]) hashes() (h, tok uint64) {
	if r.to.clustered {
		return 0, r.w
	}
	return r.w, 0
}

// sink is the runtime that delivers messages to one actor type.
type sink[M any] interface {
	// deliver routes m to key: queued here, or sent to the member that
	// serves key; h and tok are the key's hash and ring token, tr the
	// message's trace context (nil: none).
	deliver(ctx context.Context, key string, h, tok uint64, m M, s replier, tr *host.Trace) error
	// tell is deliver without a replier, in few enough words for the
	// call to pass them all (the generic body's dictionary included) in
	// registers: Tell's path. w is the key's ring token in a cluster (0:
	// unknown), else its hash.
	tell(ctx context.Context, key string, w uint64, m M) error
	// ref returns the ref of key, bound to this sink.
	ref(key string) Ref[M]
	askTimeout() time.Duration
	// waits is the list that ends asks at the ask timeout, or nil.
	waits() *askWaits
	host() *host.Host
	// declares reports whether err is one the definition declares.
	declares(err error) bool
}

// MakeRef returns the unbound ref of typ/key.
func MakeRef[M any](typ, key string) Ref[M] {
	if typ == "" {
		return Ref[M]{key: key}
	}
	return Ref[M]{key: typ + key, w: uint64(len(typ))}
}

// Type returns the actor type name the ref addresses.
func (r Ref[M]) Type() string {
	if r.to != nil {
		return r.to.typ
	}
	return r.key[:r.w]
}

// Key returns the key the ref addresses.
func (r Ref[M]) Key() string {
	if r.to != nil {
		return r.key
	}
	return r.key[r.w:]
}

// String prints the ref as type/key.
func (r Ref[M]) String() string {
	if r == (Ref[M]{}) {
		return "<nil ref>"
	}
	return r.Type() + "/" + r.Key()
}

// EncodeMsgpack encodes the ref as [type, key].
func (r Ref[M]) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := enc.EncodeString(r.Type()); err != nil {
		return err
	}
	return enc.EncodeString(r.Key())
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
	if b, ok := dec.Buffered().(interface{ Host() *host.Host }); ok {
		if to, ok := lookupSink[M](b.Host(), typ); ok {
			*r = to.ref(key)
			return nil
		}
	}
	*r = MakeRef[M](typ, key)
	return nil
}

// resolve returns r bound to the runtime that delivers it.
func (r Ref[M]) resolve(ctx context.Context) (Ref[M], error) {
	if r.to != nil {
		return r, nil
	}
	typ := r.Type()
	if typ == "" {
		return r, ErrNilRef
	}
	h, _ := ctx.Value(hostKey{}).(*host.Host)
	if h == nil {
		return r, fmt.Errorf("%w: %s is not bound to a system and the context carries none", ErrNilRef, r)
	}
	to, ok := lookupSink[M](h, typ)
	if !ok {
		return r, fmt.Errorf("%w: %s", ErrUnknownActor, r)
	}
	return to.ref(r.Key()), nil
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
	stored() Storage
}

// Storage is how a definition keeps its keys' state.
type Storage struct {
	// Durable: the state is kept in the host's Store.
	Durable bool
	// Replicas is the number of copies; Level the write level.
	Replicas int
	Level    replication.Level
	// Pinned keys live on the member their ref names, whatever the ring.
	Pinned bool
}

// Sealed implements Definition's unexported methods; a definition embeds
// it.
type Sealed struct {
	inst    func(h *host.Host) host.Kind
	storage Storage
}

// Seal returns a Sealed that instantiates through inst and keeps its
// keys' state as st says.
func Seal(inst func(h *host.Host) host.Kind, st Storage) Sealed {
	return Sealed{inst: inst, storage: st}
}

func (s Sealed) instantiate(h *host.Host) host.Kind { return s.inst(h) }
func (s Sealed) stored() Storage                    { return s.storage }

// Durable reports whether d keeps its keys' state in a store: a system
// hosting it opens one.
func Durable(d Definition) bool { return d.stored().Durable }

// StorageOf returns how d keeps its keys' state.
func StorageOf(d Definition) Storage { return d.stored() }

// Instantiate creates d's runtime inside h.
func Instantiate(d Definition, h *host.Host) host.Kind { return d.instantiate(h) }

// RefOf returns the ref of key in h for the definition named by d.
func RefOf[S, M, C any](h *host.Host, d *Spec[S, M, C], key string) Ref[M] {
	if h == nil {
		return MakeRef[M](d.Name, key)
	}
	k, ok := h.Kind(d.Name).(*kind[S, M, C])
	if !ok && h.Kind(d.Name) == nil && h.Remote != nil && h.RemoteOnly {
		// A client hosts nothing: it learns each definition from the
		// first ref taken, to encode its messages for the owner.
		h.Register(NewKind(h, d))
		k, ok = h.Kind(d.Name).(*kind[S, M, C])
	}
	if ok {
		return k.ref(key)
	}
	return unknownSink[M]{h: h, typ: d.Name}.ref(key)
}

// unknownSink answers for types a system does not host.
type unknownSink[M any] struct {
	h   *host.Host
	typ string
}

// ref returns the ref of key. Its target is the one the host keeps for
// the type, so that refs of it taken in one system compare equal.
func (u unknownSink[M]) ref(key string) Ref[M] {
	mk := func() any { return &target[M]{sink: u, typ: u.typ} }
	t, ok := u.h.Unknown(u.typ, mk).(*target[M])
	if !ok { // another definition of the name, for other messages
		t = mk().(*target[M])
	}
	return Ref[M]{to: t, key: key}
}

func (u unknownSink[M]) deliver(context.Context, string, uint64, uint64, M, replier, *host.Trace) error {
	return ErrUnknownActor
}
func (u unknownSink[M]) tell(context.Context, string, uint64, M) error {
	return ErrUnknownActor
}
func (u unknownSink[M]) askTimeout() time.Duration { return DefaultAskTimeout }
func (u unknownSink[M]) waits() *askWaits          { return nil }
func (u unknownSink[M]) host() *host.Host          { return u.h }
func (u unknownSink[M]) declares(error) bool       { return false }
