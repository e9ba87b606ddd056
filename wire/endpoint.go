package wire

import (
	"context"
	"time"
)

// Endpoint is what the layers above (membership, actors, replication) use
// of the transport. *Transport implements it over TCP; *MemEndpoint
// implements it in memory for their tests.
type Endpoint interface {
	// Self returns this node's identity.
	Self() NodeID
	// Handle sets the handler of a stream; call it before traffic flows.
	Handle(stream StreamID, h Handler)
	// OnPeerEvent sets the function told about peers coming up and going
	// down; called from one goroutine at a time, it must not block.
	OnPeerEvent(f func(PeerEvent))
	// Send queues an envelope; see Transport.Send.
	Send(ctx context.Context, to NodeID, stream StreamID, key uint64, payload []byte) (*Receipt, error)
	// PeerDead fails whatever waits for the peer and forgets its session.
	PeerDead(id NodeID)
	// LastHeard returns when anything last arrived from the peer.
	LastHeard(id NodeID) (time.Time, bool)
	// Close leaves: peers see an orderly goodbye.
	Close() error
}

var (
	_ Endpoint = (*Transport)(nil)
	_ Endpoint = (*MemEndpoint)(nil)
)
