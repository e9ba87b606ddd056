package transport

import (
	"context"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// Endpoint is what the layers above (membership, actors, replication) use
// of the transport. *Transport implements it over TCP; *MemEndpoint
// implements it in memory for their tests.
type Endpoint interface {
	// Self returns this node's identity.
	Self() ring.NodeID
	// Handle sets the handler of a stream; call it before traffic flows.
	Handle(stream StreamID, h Handler)
	// Release gives back the buffer of a payload a handler received and
	// no longer uses, for reuse; optional. See Transport.Release.
	Release(payload []byte)
	// Buffer returns an empty buffer with room for n bytes, for a payload
	// to Post; see Transport.Buffer.
	Buffer(n int) []byte
	// OnPeerEvent adds a function told about peers coming up and going
	// down; listeners are called in the order added, from one goroutine
	// at a time, and must not block.
	OnPeerEvent(f func(PeerEvent))
	// Send queues an envelope without blocking; see Transport.Send.
	Send(ctx context.Context, to ring.NodeID, stream StreamID, key uint64, payload []byte) (*Receipt, error)
	// Post queues an envelope whose fate the sender never looks at;
	// see Transport.Post.
	Post(to ring.NodeID, stream StreamID, key uint64, payload []byte) error
	// SendAfter queues an envelope that also follows what is queued
	// under key after, without holding back what is queued there later;
	// see Transport.SendAfter.
	SendAfter(ctx context.Context, to ring.NodeID, stream StreamID, key, after uint64, payload []byte) (*Receipt, error)
	// SendWait queues an envelope, waiting for room in a full send queue
	// until ctx ends; see Transport.SendWait.
	SendWait(ctx context.Context, to ring.NodeID, stream StreamID, key uint64, payload []byte) (*Receipt, error)
	// PeerDead fails whatever waits for the peer and forgets its session.
	PeerDead(id ring.NodeID)
	// LastHeard returns when anything last arrived from the peer.
	LastHeard(id ring.NodeID) (time.Time, bool)
	// Shutdown leaves once what was sent is delivered (or ctx ends):
	// new sends fail, then peers see an orderly goodbye.
	Shutdown(ctx context.Context) error
	// Close leaves at once: peers see an orderly goodbye.
	Close() error
}

var (
	_ Endpoint = (*Transport)(nil)
	_ Endpoint = (*MemEndpoint)(nil)
)
