package membership

import (
	"context"
	"time"

	"github.com/troupe-go/troupe/ring"
)

// Transport is what the membership runtime needs from the network. The
// production implementation rides the wire package's membership stream; an
// in-memory one (MemNetwork) serves the tests.
//
// Implementations must be safe for concurrent use. Send must not block for
// long: membership messages are best effort and the core retransmits what
// matters, so a full queue may drop.
type Transport interface {
	// Send queues msg for the peer that advertises addr, dialling it if
	// needed. It returns early with ctx's error when ctx ends first.
	Send(ctx context.Context, addr string, msg Message) error
	// LastHeard returns when any bytes last arrived from the peer at addr
	// (all streams, not only membership), or the zero time if never. The
	// runtime feeds it to Core.Heard before each Tick.
	LastHeard(addr string) time.Time
	// PeerDead tells the transport that the process id is dead or gone, so
	// it can release what it buffers for that peer (resend buffers,
	// pending envelopes) instead of waiting for it.
	PeerDead(id ring.NodeID)
}
