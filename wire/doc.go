// Package wire is Troupe's node-to-node transport: one connection per pair
// of nodes, carrying several logical streams with byte credit, paced at
// the rate the path delivers, and surviving broken connections without
// losing or duplicating an envelope.
//
// The byte format is specified in docs/wire.md; this comment explains the
// model. Flow-control, pacing and scheduling arithmetic lives in the
// deterministic core wire/internal/flow; this package drives it with
// sockets, goroutines and the clock.
//
// # Frames and streams
//
// Everything travels in frames behind an 8-byte versioned header. Data
// frames carry chunks of envelopes on one of four streams (control,
// membership, application, replication). Each stream has its own credit in
// uncompressed bytes, so state transfer cannot starve actor messages of
// credit. Connection frames (hello, resume, ping, pong, goodbye) ride
// outside the streams and never wait for credit or pacing. Control and
// membership envelopes go ahead of the pace; application and replication
// envelopes are paced, envelopes that fit one frame go before the frames of
// larger ones, and large ones are split and interleave. Envelopes sent to
// one peer on one stream with one key arrive in the order sent.
//
// # Handshake and refusals
//
// A connection starts with optional mutual TLS 1.3 (client certificates
// required, verified against the cluster CA), then an exchange of hellos:
// cluster name, node identity (NodeID: advertised address and process
// incarnation), protocol version, compression offers and limits. A
// mismatch refuses the connection on both sides with a *Refused error
// whose Reason says why; sends waiting for a refused peer fail with it.
//
// # Sessions and resume
//
// What two nodes say to each other belongs to a session, not to a
// connection. A session lives as long as both processes do (same
// incarnations). Each side keeps the data frames it wrote until the peer
// credits them, and counts the bytes it received. When a connection breaks
// without a goodbye, the side that knows the other's address redials at
// once, then with jittered backoff; the new connection's handshake ends
// with resume frames carrying those counts, and each side rewrites from
// the byte the other stopped at. Each side fences the old connection (its
// reader stops counting) before it snapshots its counts, and makes a
// connection its own only when the peer has answered on it, so the counts
// either side acts on are never stale. A peer that restarted starts a
// fresh session and every send still pending towards its previous life
// fails with ErrPeerRestarted. A peer unreachable for 2 × KeepaliveAfter +
// KeepaliveTimeout, or declared dead through PeerDead, fails what waits for
// it with ErrPeerDead.
//
// # Simultaneous dial
//
// When both nodes dial each other, the connection dialed by the smaller
// identity wins once its handshake completes: its acceptor takes it at
// once, and the smaller node, accepting the other's dial while its own is
// in flight, waits at most half the handshake timeout for its own before
// taking the other's (a relay may have swallowed its dial). The loser is
// told with a goodbye.
//
// # Sending and receiving
//
// Transport.Send queues an envelope and returns a Receipt that resolves
// when the peer's handler has taken the envelope, or with the reason it
// never will. The send's context governs the envelope until its last byte
// is written: cancelling it drops what was not yet sent. A Handler per
// stream receives envelopes; its return gives the credit back. Endpoint
// is the interface the layers above program against; MemNetwork provides
// an in-memory implementation for their tests.
//
// # Envelopes
//
// Envelopes are msgpack maps keyed by field name, tagged with a stable
// type name from a Registry, so a field can be added without breaking
// older readers.
//
// # Status
//
// Landed (issue 3): frame codec with typed errors and fuzz targets;
// handshake with refusals (cluster, version, limits, identity, TLS),
// mutual TLS 1.3, s2/zstd compression with capped decompression; envelope
// registry; sessions over the flow scheduler with byte credit, receipts,
// cancellation, keepalive, last-heard times, TCP_NOTSENT_LOWAT, bounded
// send queue; resume with fencing and confirm; simultaneous dial and the
// relay rule; restart and peer-dead failures; clients; Endpoint and
// MemNetwork; property test with random cuts (internal/faultnet);
// benchmarks for bulk, small envelopes and head-of-line latency over a
// 50 Mbit/s user-space link (internal/delayproxy).
//
// Left for the next session:
//   - Tests across network namespaces with tc tbf and nftables
//     (internal/netns) for loss, partitions and resets; the head-of-line
//     benchmark on a real tbf link with a 64 MiB envelope (it runs on the
//     user-space proxy with 16 MiB envelopes today), BENCHMARKS.md, and a
//     resume benchmark (time from cut to resumed delivery, bytes resent).
//   - Bulk throughput is well under the 0.9× plain-TCP goal on loopback;
//     profile the per-frame path (lock hand-offs between reader, writer and
//     deliverers; one wake-up per received chunk; copies into partial
//     envelopes).
//   - Head-of-line p99 under bulk is about 15–45 ms against an idle
//     5–7 ms on a loaded machine; the p50 of ~8 ms points at a standing
//     queue at the bottleneck (pacing gain, cwnd floor): tune with the
//     flow core.
//   - Abort frames are rewritten after a resume whether or not the peer
//     saw them (receivers ignore unknown ids); a long-lived session that
//     cancels many partly sent envelopes keeps their abort records until
//     credit passes them.
//   - The resend buffer is bounded by the flow core's maximum window (8
//     MiB per stream); the send queue by Config.SendQueue, which fails fast
//     with ErrQueueFull instead of waiting on the context.
//   - Metrics (prometheus.Registerer in Config) and a Drain/Shutdown(ctx)
//     that waits for in-flight receipts before the goodbye.
//   - A dial that fails while a session waits is not reported as
//     "suspect" to the membership layer yet (only PeerEvent up/down).
package wire
