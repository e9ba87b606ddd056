package actor

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/vmihailenco/msgpack/v5"
)

// ID identifies an actor independently of any system: its type name and key.
type ID struct {
	Type string
	Key  string
}

func (id ID) String() string { return id.Type + "/" + id.Key }

// Ref addresses one key of one actor type that accepts messages of type M.
// It is a small value: comparable with ==, printable, and encodable inside
// messages and state (as its ID). Taking a ref does not activate the actor;
// the first message does.
//
// Refs obtained from one system (Def.Ref, Context.Self) carry that system
// and compare equal exactly when they name the same actor. A ref decoded
// outside a system carries none: it delivers through the system found in
// the context passed to Tell or Ask (a handler's Context is one), and
// compares equal to bound refs only through ID.
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
	// askHere runs the ask m to key (hash h) on the calling goroutine if
	// the key's actor is here and idle (see localask.go); false means the
	// caller must deliver it.
	askHere(key string, h uint64, m M, s replier) bool
	// hash is key's hash in this sink's table (0 where it has none).
	hash(key string) uint64
	// token is key's ring token (0 outside a cluster).
	token(key string) uint64
	askTimeout() time.Duration
	host() *host.Host
}

// ID returns the system-independent identity of the ref.
func (r Ref[M]) ID() ID { return ID{Type: r.typ, Key: r.key} }

// Key returns the key the ref addresses.
func (r Ref[M]) Key() string { return r.key }

// IsZero reports whether r is the zero Ref.
func (r Ref[M]) IsZero() bool { return r.typ == "" && r.key == "" && r.to == nil }

// String prints the ref as type/key.
func (r Ref[M]) String() string {
	if r.IsZero() {
		return "<nil ref>"
	}
	return r.typ + "/" + r.key
}

// GoString prints the ref for %#v.
func (r Ref[M]) GoString() string { return fmt.Sprintf("actor.Ref{%q, %q}", r.typ, r.key) }

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

// System is what hosts actors: *system.System and every handler Context.
type System interface {
	// Runtime returns the runtime behind the system. It is the seam
	// between the typed API and the runtime; applications never call it.
	Runtime() *host.Host
}

// Ref returns the ref of key in sys. It does not activate the actor. A
// type that sys does not host yields a ref whose sends fail with
// ErrUnknownActor.
func (d *Def[S, M]) Ref(sys System, key string) Ref[M] {
	r := Ref[M]{typ: d.name, key: key}
	if sys == nil {
		return r
	}
	h := sys.Runtime()
	if h == nil {
		return r
	}
	k, ok := h.Kind(d.name).(*kind[S, M])
	if !ok && h.Kind(d.name) == nil && h.Remote != nil && h.RemoteOnly {
		// A client hosts nothing: it learns each definition from the
		// first ref taken, to encode its messages for the owner.
		h.Register(d.Instantiate(h))
		k, ok = h.Kind(d.name).(*kind[S, M])
	}
	if ok {
		r.to, r.h, r.tok = k, k.hash(key), k.token(key)
	} else {
		r.to = unknownSink[M]{h: h}
	}
	return r
}

// RefAt returns the ref of key on the cluster member that advertises
// member (a host:port, as in system.Members), for a Pinned definition: the
// key is tied to that member, bypasses placement, has one copy and never
// moves. While the member is down, sends fail with ErrUnavailable; after
// it restarts, the actor starts from its initial state. The ref's key is
// member + "/" + key.
func (d *Def[S, M]) RefAt(sys System, member, key string) Ref[M] {
	if member == "" || key == "" {
		return Ref[M]{typ: d.name, key: ""}
	}
	return d.Ref(sys, member+"/"+key)
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
func (u unknownSink[M]) askHere(string, uint64, M, replier) bool { return false }
func (u unknownSink[M]) askTimeout() time.Duration               { return DefaultAskTimeout }
func (u unknownSink[M]) host() *host.Host                        { return u.h }
