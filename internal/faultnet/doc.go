// Package faultnet injects network faults at the net.Conn seam, so transport
// tests can break connections at exact, reproducible byte offsets.
//
// It is test infrastructure: internal, loopback-only, and deterministic given
// a seed.
//
// # Model
//
// A Conn wraps any net.Conn and counts the bytes that pass in each direction.
// A Fault says what happens and when:
//
//   - Cut closes the connection abruptly (the peer sees EOF, no goodbye).
//   - Reset sets SO_LINGER to 0 before closing, so the peer sees a TCP RST
//     (on a Pipe, the peer's reads fail with ECONNRESET at once).
//   - Stall stops delivering in that direction without closing: writes or
//     reads block until Resume, Close, or their deadline.
//
// The fault fires when exactly At bytes have passed in its direction: a write
// of 10 bytes across At = 4 delivers 4 bytes, then fires. At = 0 fires before
// the first byte. Between picks a seeded offset in [a, b), which is how a test
// cuts "during the handshake" (Between(rng, 0, handshakeLen)) or "mid-frame".
// Offsets are exact when one goroutine writes (and one reads) at a time, the
// usual discipline for a transport; concurrent writers share the count.
//
// On TCP, Linux turns a Cut into an RST when this side still has unread
// received bytes; a Reset may discard bytes the peer has not read yet. Both
// are what a real crash does.
//
// Errors after a fault are *net.OpError values whose cause is ErrCut or
// ErrReset, so errors.Is tells injected faults from real ones.
//
// # Networks, partitions and dials
//
// A Network hands out wrapped listeners and dialers, applies a seeded fault
// plan to every connection it makes, and partitions endpoints by name (the
// listen address of each node). A partition fails new dials (Refuse: at
// once; Blackhole: when the context ends) or swallows them (Swallow: the dial
// succeeds and nothing is ever carried), and stalls the connections already
// open between the two endpoints until Heal, as a real partition would:
// writes succeed until the buffers fill, reads deliver nothing, and after
// Heal every byte arrives in order.
//
// ListenPipe gives the same Network an in-process listener with no socket at
// all: plans and partitions work alike, and delivery is deterministic.
//
//	fn := faultnet.NewNetwork(1)
//	lnA, _ := fn.Listen(ctx, "127.0.0.1:0")
//	lnB, _ := fn.Listen(ctx, "127.0.0.1:0")
//	dialA := fn.Dialer(lnA.Addr().String()) // A's outgoing conns carry A's name
//	fn.Partition(lnA.Addr().String(), lnB.Addr().String(), faultnet.Refuse)
//
// # Pipes
//
// Pipe returns an in-process pair with buffered, full-duplex delivery,
// deadlines and the same fault controls, for tests that need no sockets at all.
//
// # Silent relays
//
// SilentRelay accepts TCP connections and never carries a byte onward: the
// dial succeeds and the handshake never completes. It models a middlebox that
// swallows a connection, the case the simultaneous-dial rule must survive.
// Point a node's address map at SilentRelay.Addr for real sockets, or use a
// Swallow partition for the same effect without one.
package faultnet
