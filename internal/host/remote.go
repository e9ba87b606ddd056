package host

import (
	"context"
	"time"
)

// Remote is the cluster side of a Host: placement and transport. A Host
// without one (the embedded default) delivers everything locally. The
// typed layer (package actor) encodes and decodes messages; a Remote moves
// bytes and decides where a key lives.
type Remote interface {
	// Token returns the ring position of typ/key, computed once per ref.
	Token(typ, key string) uint64
	// Ask sends m and calls to.Reply once with the encoded reply or the
	// error, unless the returned ask is withdrawn first (then to is not
	// called and the owner drops or cancels the request). Interfaces
	// rather than callbacks: the asker's slot and the router's record of
	// the ask serve as both, without a closure allocated per ask.
	Ask(ctx context.Context, m Outbound, to Replier) (Withdrawer, error)
	// Route returns the placement of k's keys, for k to keep, so that
	// placement and tells need no lookup of k by name.
	Route(k RemoteKind) Route
}

// Replier receives the outcome of an ask.
type Replier interface {
	Reply(body []byte, err error)
}

// ReplyFunc is a Replier that calls the function.
type ReplyFunc func(body []byte, err error)

// Reply implements Replier.
func (f ReplyFunc) Reply(body []byte, err error) { f(body, err) }

// Withdrawer is an ask in flight: sent to another node (Remote.Ask), or
// being served here for one (RemoteKind.DeliverRemote).
type Withdrawer interface {
	// Withdraw gives the ask up, as Remote.Ask and
	// RemoteKind.DeliverRemote say.
	Withdraw()
}

// Route places and sends the messages of one actor type (see
// Remote.Route).
type Route interface {
	// Here reports whether this node serves key now. An error means no
	// node can (no live member hosts the type, or this node lost the
	// majority and would own the key).
	Here(key string, token uint64) (bool, error)
	// Tell sends m to the node that serves its key, without waiting for
	// it to be handled.
	Tell(ctx context.Context, m Outbound) error
	// TellOrHere is Here and Tell in one look at the ring, for a tell
	// whose message enc encodes (m, named name): it sends the tell unless
	// this node serves key, and then sends nothing and reports here.
	TellOrHere(ctx context.Context, key string, token uint64, name string, enc MessageAppender, m any) (here bool, err error)
	// Owns reports whether placement puts key on this node, whether or
	// not a hand-off holds it (see Here).
	Owns(key string, token uint64) (bool, error)
	// HoldWake holds wake, in a message's place, while key, which this
	// node owns, waits for its previous owner to drain it (the hand-off
	// of a change of owner): wake is called once, when the hold ends, in
	// order with the messages held for it, with owned reporting whether
	// the node still owns the key then (false too when the router
	// closed). It reports false, and holds nothing, when the node does not
	// own the key or the key waits for no drain.
	HoldWake(key string, token uint64, wake func(owned bool)) bool
}

// Outbound is one message leaving this node.
type Outbound struct {
	Type, Key string
	Token     uint64
	// Name is the concrete message type's registered name ("" when the
	// definition's message type is itself concrete).
	Name string
	// Body is valid only during the call: the caller reuses it.
	Body []byte
	// Enc, when set (tells only), encodes the message Msg in Body's
	// place: the body is then appended straight into the batch that
	// carries it, without a buffer of its own. Body is empty.
	Enc MessageAppender
	Msg any
	// Deadline is when the asker stops waiting (zero for tells).
	Deadline time.Time
	// Chain lists the actors (type, key pairs) waiting, up the call chain,
	// for the ask being sent; it detects ask cycles across nodes.
	Chain []string
	// RequestID is the ask's id (zero for tells).
	RequestID RequestID
	// ReadOnly is set for an ask whose message says it changes nothing
	// (actor.ReadOnly): it may be sent again after its owner died.
	ReadOnly bool
	// IdempotencyKey is the ask's idempotency key ("" for none): its
	// owner answers a retry from what it kept, so it too may be sent
	// again after its owner died.
	IdempotencyKey string
	// Trace is the message's trace context (tells and asks); nil for
	// none.
	Trace *Trace
}

// MessageAppender appends a message's encoding to dst. It cannot fail.
type MessageAppender interface {
	AppendMessage(dst []byte, m any) []byte
}

// Encoded returns m with its body in Body, encoding it if Enc is set.
func (m Outbound) Encoded() Outbound {
	if m.Enc != nil {
		m.Body, m.Enc, m.Msg = m.Enc.AppendMessage(nil, m.Msg), nil, nil
	}
	return m
}

// Inbound is one message that arrived for a key this node serves.
type Inbound struct {
	// Key may alias the network buffer: copy it to keep it.
	Key  string
	Name string
	// Body is valid only during the call.
	Body []byte
	// Deadline is when the asker stops waiting; zero for tells.
	Deadline  time.Time
	Chain     []string
	RequestID RequestID // the ask's id; zero for tells
	// IdempotencyKey is the ask's idempotency key, "" for none.
	IdempotencyKey string
	// Trace is the message's trace context; nil for none.
	Trace *Trace
	// Reply, for asks, receives the outcome exactly once: the encoded
	// reply, or an error. Nil for tells. The body is valid only during
	// the call: the replier reuses its buffer.
	Reply Replier
}

// RemoteKind is implemented by kinds that accept messages from other
// nodes.
type RemoteKind interface {
	Kind
	// DeliverRemote decodes and queues in without waiting for mailbox
	// room. For asks it returns what drops the request if still queued
	// or cancels its handler if running.
	DeliverRemote(in Inbound) (cancel Withdrawer, err error)
	// DeliverTells queues a run of tells from another node, in order,
	// each as DeliverRemote would, with one decoder for the run. It
	// reports each tell it cannot queue to b.Dropped.
	DeliverTells(b TellBatch)
	// Pinned reports whether keys are tied to a member named in the key.
	Pinned() bool
	// Replicas is how many copies of each key's state the definition keeps.
	Replicas() int
}

// Mover is implemented by kinds whose activations can end because their
// key moved to another member.
type Mover interface {
	// Moved ends the activations of the keys here does not accept, once
	// they have handled what is queued.
	Moved(here func(key string) bool)
	// Active reports whether key has an activation here, live or ending
	// after a move: a new owner waits until it has none (hand-off).
	Active(key string) bool
}

// QueueLister is implemented by kinds that can name their keys with
// queued messages (what a leaving node abandons).
type QueueLister interface {
	QueuedKeys(limit int) []string
}

// TellBatch is a run of tells that arrived for one actor type, in the
// order they were sent.
type TellBatch interface {
	Len() int
	// Tell returns tell i. Key and body alias the network buffer and are
	// valid only during DeliverTells: copy them to keep them.
	Tell(i int) (key, name string, body []byte)
	// Dropped reports that tell i was not queued, and why.
	Dropped(i int, err error)
}
