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
// registry; sessions over the flow scheduler with byte credit (credit
// frames carry consumed, window and received counts), receipts,
// cancellation, keepalive, last-heard times, TCP_NOTSENT_LOWAT, a bounded
// send queue; resume with fencing, a single resume slot and a confirm
// frame, paced resends; simultaneous dial and the relay rule; restart and
// peer-dead failures; a Suspect peer event when a redial fails; clients
// and their grace; Endpoint and MemNetwork.
// Tests: unit tests per piece, a rapid property over random workloads
// (1 B to 4 MiB, four streams, random cuts at any byte including the
// handshake, cancellations; internal/faultnet), 100 seeded simultaneous-dial
// trials, refusals, network-namespace tests (resets, a silent partition, a
// tbf cap; internal/netns), goleak. Benchmarks (go test -bench): bulk and
// plain TCP, 100-byte envelopes and a naive sender, resume, head-of-line
// latency on a 50 Mbit/s tbf link and on a user-space proxy, with a naive
// FIFO baseline.
//
// Measured on a shared, loaded 2-core machine (figures vary by 2x between
// runs): bulk 1 MiB envelopes 400-450 MB/s uncompressed against 870-1540
// MB/s for a plain TCP copy (0.3-0.5x, goal 0.9x); 100-byte envelopes
// 2.2-2.5 us each against 3.2-3.9 us for a naive length-prefixed sender
// (1.4-1.6x) when callers keep at most 4096 sends outstanding, but 0.6x
// when a single caller queues hundreds of thousands; on the tbf link,
// 100-byte envelopes every 1 ms beside 64 MiB envelopes: p50 4.5 ms, p99
// 12-18 ms against an idle p99 of 0.3 ms, link 90% used (goal: idle + about
// 10 ms); the naive FIFO waits 6-7 s. A cut costs 3.7-3.9 ms to the next
// delivery on loopback and rewrites about 20 KiB.
//
// Left for the next session:
//   - Head-of-line: the p50 of ~4.5 ms on the tbf link is a standing queue
//     at the bottleneck (pacing gain and cwnd with a grant-inflated RTT);
//     tune with the flow core. A smaller cwnd floor (16 KiB) did not help.
//   - Bulk throughput: syscalls dominate now (a writev per scheduler batch,
//     reads through a 64 KiB buffer then a copy into the envelope); read
//     data payloads straight into the envelope buffer, batch larger writes
//     when the pacer allows.
//   - Send never blocks: bound the queue by envelope count as well as
//     bytes (a queue of 600k tiny envelopes makes the maps cache-unfriendly),
//     or offer a Send that waits for room on the context.
//   - BENCHMARKS.md (outside this package's paths) with the ratios above,
//     and the resume benchmark over the tbf link.
//   - Metrics (prometheus.Registerer in Config); Drain/Shutdown(ctx) that
//     waits for in-flight receipts before the goodbye.
//   - Abort records of partly sent, cancelled envelopes stay in the resend
//     buffer until credit passes them; they are rewritten after a resume
//     whether or not the peer saw them (receivers ignore unknown ids).
//   - Send to an incarnation newer than the session's fails with
//     ErrPeerRestarted until the transport itself meets the new process
//     (after the old connection breaks); it could instead drop the old
//     session at once.
package wire
