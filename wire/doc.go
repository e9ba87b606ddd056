// Package wire is Troupe's node-to-node transport: one connection per pair
// of nodes, carrying several logical streams with byte credit, surviving
// broken connections without losing or duplicating an envelope.
//
// The byte format is specified in docs/wire.md; this comment explains the
// model.
//
// # Frames and streams
//
// Everything travels in frames behind an 8-byte versioned header. Data
// frames carry chunks of envelopes on one of four streams (control,
// membership, application, replication). Each stream has its own credit in
// uncompressed bytes, so state transfer cannot starve actor messages of
// credit. Connection frames (hello, resume, ping, pong, goodbye) ride
// outside the streams and never wait for credit.
//
// # Handshake and refusals
//
// A connection starts with optional mutual TLS 1.3, then an exchange of
// hellos: cluster name, node identity (NodeID: advertised address and
// process incarnation), protocol version, compression offers and limits.
// A mismatch refuses the connection on both sides with a *Refused error
// whose Reason says why.
//
// # Sessions and resume
//
// What two nodes say to each other belongs to a session, not to a
// connection. A session lives as long as both processes do (same
// incarnations). Each side keeps the data frames it wrote until the peer
// credits them, and counts the bytes it received. When a connection breaks
// without a goodbye, a new one resumes the session: each side resends
// from the byte the other says it stopped at. A peer that restarted starts
// a fresh session and every send still pending towards its previous life
// fails with ErrPeerRestarted.
//
// # Envelopes
//
// Envelopes are msgpack maps keyed by field name, tagged with a stable
// type name from a Registry, so a field can be added without breaking
// older readers.
//
// # Status
//
// Landed: frame codec, handshake with refusals and mutual TLS, compression
// codecs. See the end of this comment for what is left.
package wire
