// Package wire configures Troupe's member-to-member transport and names
// the errors it reports. Members and clients run the transport for you;
// this package holds what you set (TLS, limits, compression, addresses,
// a dialer) and what you may see (typed errors). Nodes are named by
// ring.NodeID. The byte format is specified in docs/wire.md, and
// internal/transport implements it.
//
// # What the transport does
//
// Two processes talk over one TCP connection, which carries several
// logical streams (membership, actor messages, and later replication),
// each with its own byte credit, so a burst on one never starves another
// of credit. A stream's credit grows towards what the path holds in a
// round trip, never past the window both sides agreed, which bounds what
// a peer may make the other hold unread. Messages that fit one frame go
// ahead of the frames of large ones, and large messages are split and
// interleaved, so a small message waits for at most about a frame of a
// large one on the link. Sending is
// paced at the rate the path delivers, which keeps the kernel's queues
// short.
//
// What two processes say to each other belongs to a session that lives as
// long as both processes do, not to a connection. When a connection
// breaks, the side that knows the other's address redials at once, then
// with jittered backoff, and both sides resume from the byte the other
// stopped at: nothing is lost or delivered twice. Messages from one
// member to one key on one stream arrive in the order sent.
//
// # Configuring
//
// Mutual TLS 1.3 is on when TLS is set: both sides present a certificate
// and check the other's chain against the cluster CA (host names are not
// checked; possession of a certificate the CA signed is membership).
// Limits bound frames, messages and windows; Compression offers s2 or
// zstd, with decompression capped at the agreed limits. AddressMap
// rewrites the addresses a process dials (containers, NAT), and Dialer
// replaces the TCP dialer. Both sides of a connection must agree on the
// cluster name, the protocol version and the limits; a mismatch refuses
// the connection on both sides with a *Refused error whose Reason says
// why.
//
// # Identity
//
// A node is named by a ring.NodeID: the address a process advertises and
// an incarnation chosen when it starts. A peer that restarts is a new
// identity: what was still pending towards its previous life fails with
// ErrPeerRestarted. A peer unreachable for 2 × KeepaliveAfter +
// KeepaliveTimeout, or declared dead by membership, fails what waits for
// it with ErrPeerDead; an address that never answered within the resume
// grace fails with ErrNeverConnected, which also matches ErrPeerDead. A
// full send queue reports ErrQueueFull.
//
// # Known gaps
//
//   - A message larger than the window must cross, so the bytes of one not
//     yet whole are credited as they arrive while little waits unread: a
//     receiver that does not read holds at most two windows of whole
//     messages, plus those the sender had started on the stream (one per
//     key, within its send queue).
//   - The send queue is bounded by bytes, not by message count.
//   - After a message to a newer incarnation of a peer, the older
//     process's session is dropped even if that process is still up.
//   - A cancelled message that was partly sent stays in the resend buffer
//     until the peer's credit passes it.
//   - No metrics yet.
package wire
