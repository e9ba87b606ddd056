package actor

import (
	"context"
	"fmt"

	"github.com/troupe-go/troupe/internal/runtime"
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
	r runtime.Ref[M]
}

// ID returns the system-independent identity of the ref.
func (r Ref[M]) ID() ID { return ID{Type: r.r.Type(), Key: r.r.Key()} }

// Key returns the key the ref addresses.
func (r Ref[M]) Key() string { return r.r.Key() }

// IsZero reports whether r is the zero Ref.
func (r Ref[M]) IsZero() bool { return r.r == runtime.Ref[M]{} }

// String prints the ref as type/key.
func (r Ref[M]) String() string { return r.r.String() }

// GoString prints the ref for %#v.
func (r Ref[M]) GoString() string { return fmt.Sprintf("actor.Ref{%q, %q}", r.r.Type(), r.r.Key()) }

// EncodeMsgpack encodes the ref as [type, key].
func (r Ref[M]) EncodeMsgpack(enc *msgpack.Encoder) error { return r.r.EncodeMsgpack(enc) }

// DecodeMsgpack decodes a ref encoded by EncodeMsgpack. When the decoder
// reads from a source that belongs to a system, the ref is bound to it.
func (r *Ref[M]) DecodeMsgpack(dec *msgpack.Decoder) error { return r.r.DecodeMsgpack(dec) }

// System is what hosts actors: *system.System, *client.Client and what a
// handler's Context.System returns. Only those implement it.
type System interface {
	runtimeSystem
}

type runtimeSystem = runtime.System

// Ref returns the ref of key in sys. It does not activate the actor. A
// type that sys does not host yields a ref whose sends fail with
// ErrUnknownActor.
func (d *Def[S, M]) Ref(sys System, key string) Ref[M] {
	return Ref[M]{runtime.RefOf(runtime.HostOf(sys), &d.spec, key)}
}

// RefAt returns the ref of key on the cluster member that advertises
// member (a host:port, as in system.Members), for a Pinned definition: the
// key is tied to that member, bypasses placement, has one copy and never
// moves. While the member is down, sends fail with ErrUnavailable; after
// it restarts, the actor starts from its initial state. The ref's key is
// member + "/" + key.
func (d *Def[S, M]) RefAt(sys System, member, key string) Ref[M] {
	if member == "" || key == "" {
		return Ref[M]{runtime.MakeRef[M](d.spec.Name, "")}
	}
	return d.Ref(sys, member+"/"+key)
}

// Tell sends msg to the actor without waiting for it to be handled. Under
// the Refuse overflow policy it never blocks; under Wait it waits for
// mailbox room until ctx ends. Tell is a method so that any message type
// implementing M is accepted as it is.
func (r Ref[M]) Tell(ctx context.Context, msg M) error { return r.r.Tell(ctx, msg) }
