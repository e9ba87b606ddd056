// Package wire is Troupe's node-to-node transport: one connection per pair
// of nodes, carrying several logical streams with byte credit, paced at
// the rate the path delivers, and surviving broken connections without
// losing or duplicating an envelope.
//
// This package holds what a user configures and observes: Config (with
// Limits, Compression, TLS and the address map), the node identity
// NodeID, the handshake's *Refused and the sentinel errors. The engine
// lives in internal/transport; the Transport, Receipt, Handler, Endpoint,
// Post, Registry and MemNetwork named below are that package's.
//
// The byte format is specified in docs/wire.md; this comment explains the
// model. Flow-control, pacing and scheduling arithmetic lives in the
// deterministic core internal/transport/flow; internal/transport drives it
// with sockets, goroutines and the clock.
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
//
// Landed in the last session (issue 3, part 2):
//   - Bulk path: the window keeps room for credit that returns in bursts
//     (BBR's ack aggregation, capped at the grant delay's worth, 2 ms, so
//     a slow bottleneck's queue does not grow); a large envelope's frames
//     grow to 250 µs of sending (up to the frame limit), so a gigabit path
//     costs one system call and wake-up per 256 KiB instead of per 16 KiB.
//     Both are sized by a sustained delivery rate over 20 ms spans, which
//     a token bucket's burst cannot inflate as it does the bandwidth
//     estimate. Uncompressed chunks are read straight into their
//     envelope's buffer, applied only once whole; a new envelope's buffer
//     is allocated and zeroed outside the session lock.
//   - API: a Send while the session waits out a redial backoff redials at
//     once (at most once per 10 ms); a session whose address never
//     answered gives up after the resume grace (ErrNeverConnected, which
//     also matches ErrPeerDead) and is forgotten; a Send to a newer
//     incarnation than the session's fails what was pending with
//     ErrPeerRestarted and starts afresh; OnPeerEvent adds a listener
//     (it used to replace the only one) and every listener is told in
//     the order added; LastHeard never goes backwards; SendWait waits for
//     room in a full send queue until its context ends (Send still fails
//     with ErrQueueFull); Shutdown(ctx) refuses new sends, waits until
//     what was sent is credited or failed (or ctx ends), then closes as
//     Close does. Endpoint gained SendWait and Shutdown; MemEndpoint has
//     all of it.
//
// Landed in session 3 (issue 5, remote ask latency): a sender finding
// the writer idle writes its frames itself, with one non-blocking system
// call (what the socket does not take goes to the writer, with the
// turn); grants not yet due ride along with data frames, and one due
// later arms a session timer instead of waking the writer; a credit frame
// wakes the writer only when something waits for credit; a DeferHandler
// finishes an envelope's work after the envelope is released (the router
// runs actor handlers there); the reader's relief is one watch per
// connection (a timer looking every 1 ms while inline deliveries go on;
// since session 5 every 3 ms while the deliveries it finds are over)
// instead of a timer per delivery. Session 4: envelopes a QuickHandler
// calls quick (the router's replies) are delivered without the watch,
// and an inline delivery whose deferred work may reply arms the grant
// timer only after that work, if the grant is still pending (so request
// and reply traffic runs no timer on the asker's reader, and no grant
// timer on the owner's); on plain TCP the reader reads and the inline
// writer writes with raw system calls (rawio_linux.go), sparing the
// runtime's sysmon wake-up at each system call entry after an idle
// spell, once per request on a request-reply link.
//
// Landed in session 6 (issue 5, timers per ask): fewer than 4 KiB
// consumed with no envelope held need no grant timer (flow's
// RecvConfig.Slack; grantSlack argues why the peer cannot stall): the
// grant rides along with this side's next frames, so a request and reply
// exchange runs no grant timer on either side; envelopes queued behind
// a running handler arm it once the bytes waiting reach the slack. The
// relief watch waits 2, 4, then 8 periods after looks that find the
// deliveries over: a ping-pong of short deliveries costs a firing every
// 8 ms, and a blocking inline handler is relieved within 1-9 ms (was
// 1-4 ms).
//
// Tests: unit tests per piece, a rapid property over random workloads
// (1 B to 4 MiB, four streams, random cuts at any byte including the
// handshake, cancellations; internal/faultnet), 100 seeded simultaneous-dial
// trials, refusals, network-namespace tests (resets, a silent partition, a
// tbf cap; internal/netns), a test per API behaviour above, goleak.
// Benchmarks (go test -bench): bulk beside a plain TCP copy in one run
// (BulkVsTCP), bulk and plain TCP separately, 100-byte envelopes beside a
// naive sender in one run (SmallVsNaive) and separately, resume,
// head-of-line latency on a 50 Mbit/s tbf link and on a user-space proxy,
// with a naive FIFO baseline.
//
// Landed in session 3 (issue 3, bulk throughput):
//   - Buffers: envelopes of 32 KiB and more whose whole size is reserved
//     are read into buffers from a per-transport pool (four size classes
//     per power of two, at most 32 MiB kept); a handler may give its
//     payload back with Transport.Release (Endpoint.Release; optional,
//     MemEndpoint's does nothing). Dropped and aborted envelopes go back
//     too.
//   - TCP_NOTSENT_LOWAT follows the large-frame size (FrameTime at the
//     sustained rate) with Config.NotSentLowat as the floor: a fixed
//     16 KiB woke loopback's writer every 16 KiB.
//   - Chunks beyond what the read buffer holds are read straight from the
//     socket, and the buffer's refill for the next header after one asks
//     for 4 KiB, not 64 KiB of the next chunk to copy again.
//   - A span in which the sender was app- or credit-limited may raise the
//     sustained rate, never lower it.
//
// Landed in session 4 (issue 3, small envelopes): a send allocates its
// Receipt and nothing else (the receipt's channel is made only when
// Done or Wait asks; the session's queued map holds receipts); an
// envelope that arrives in one frame is copied and delivered without a
// partial-envelope record; the resend and await queues are fifos that
// reuse their slice; the reader dates frames by the socket read that
// brought them, not a clock reading each; a send the stream's credit
// surely holds back neither writes inline nor wakes the writer. CPU per
// 100-byte envelope 3.4 -> 2.6 µs, 1.3x less than a naive sender's
// write per message; wall-clock side by side still 0.8-1.0x of it on
// the loaded machine (BENCHMARKS.md, "Session 4").
//
// Landed in session 5 (issue 3, small envelopes): a receipt somebody
// waits on (Done, Wait) whose envelope ends within GrantBytes of what
// its stream has written gets a ping after it once nothing more is
// queued, and a pong carries the pending grants, so the last receipt of
// a burst no longer waits out the peer's grant delay (2 ms); a stream
// whose envelopes still wait for their handler when the ping arrives
// grants once they are consumed. Fewer hops per credit round trip: the
// goroutine that consumed an envelope writes a due grant itself (one
// non-blocking system call, when the writer's turn is free and nothing
// else is queued), the reader of a credit frame writes what the credit
// frees when only small envelopes are queued (up to 64 KiB), and a send
// or inline write that finds the window full no longer wakes the writer.
// 100-byte envelopes side by side with the naive sender 0.98 -> 1.26x
// (median of 8 alternate pairs), CPU per envelope 2.4 -> 2.2 us.
//
// Landed in session 5 (issue 3, bulk throughput): each stream's
// deliverer waits on its own cond (one shared cond woke all four on every
// envelope); on plain TCP the chunks of an incomplete envelope are
// granted when the reader finds the socket empty (the raw read callback
// returns on EAGAIN if a grant waits) or per a quarter of the window,
// not per 32 KiB; the reader at a drain and a deliverer after a
// consumption write the grant themselves when the writer is idle
// (writeInlineLocked) instead of waking it; after 50 ms in which only
// large envelopes were written (no one-frame envelope, no control or
// membership frame), TCP_NOTSENT_LOWAT is 1 ms at the sustained rate (at
// most 4 MiB) and the writer takes up to 1 MiB of frames per system call,
// until the next small envelope. Credit frames 4.6-7 -> 1.2 per MiB,
// parks 9.8 -> 3.5 per MiB, BulkVsTCP 0.67 -> 0.76 (medians of 8
// alternate pairs). Second pass: the reader delivers a large envelope
// (completed by a chunk read in place, or the last chunk of several
// frames) itself when its stream's deliverer is idle, on the application
// and replication streams (membership and control keep their
// deliverers), with the relief watch as for small ones: deliverer parks
// 0.92 -> 0.04 per MiB, BulkVsTCP 0.76 -> 0.86 (medians of 8 alternate
// pairs at load 2-5; 0.69 -> 0.78 at load 12-14).
//
// Landed in session 6 (issue 5, remote ask): Post (Endpoint.Post) is a
// Send without a receipt, for senders that never look at one (the
// router's batches): the session reuses its receipt once the credit came
// back (not while Shutdown may hold it). Envelopes of up to 256 bytes in
// one frame are copied into a per-session 4 KiB slab instead of a buffer
// each; a payload's capacity ends with it (an append copies), and a
// payload kept pins its slab.
//
// Measured on the shared 2-core machine, load average 6-22 from other
// work (BENCHMARKS.md has the commands and every run): bulk 1 MiB
// envelopes against a plain TCP copy in the same run 0.26-0.50x after
// session 2 (0.13-0.34x before it), and after session 3, alternately
// with main at load 10-12, 0.61x (0.51-0.75) with a releasing handler and
// 0.42x with one that keeps payloads, main 0.35x (goal 0.9x, not met); head-of-line on the tbf link, 100-byte envelopes
// every 1 ms beside 64 MiB envelopes: p50 4.4-5.6 ms, p99 7.4-9.5 ms at
// load 6-8 and 6.2-21 ms at 10-18 (before, alongside: 7.3-10.8 and
// 8.1-81 ms; goal about 10 ms), link 80-95% used; 100-byte envelopes side
// by side with a naive length-prefixed sender 0.98-1.15x, as before (2.9-3.6
// us each); a cut costs 3.7-3.9 ms to the next delivery on loopback.
//
// Left for the next session:
//   - Bulk throughput (0.78-0.86x of plain TCP after session 5, goal
//     0.9x): the writer's writev is a raw system call on plain TCP
//     since session 5's third pass (sysmon took its P during long
//     loopback writes), which cut wire's CPU per MiB by about 12% and
//     its context switches to under 2 per MiB, but sped the plain copy
//     in the same benchmark as much. Wire's own user-level code is 3-4%
//     of its CPU; the rest is the kernel's send and receive paths and
//     the credit frames a plain copy does not send. SO_RCVLOWAT for
//     the rest of a chunk did not pay (the reader rarely waits inside a
//     chunk; reads stay at 13-14 per MiB). Before session
//     5 each lowat-sized write (4.7 per MiB against 1.4) ran the transmit
//     path itself. Grants once per fixed size (256 KiB) stall at the
//     congestion-window floor; they must follow the drain. Also tried without gain: 4 KiB
//     aligned frames, 8x the congestion window, a 4x lowat; a 1 ms
//     FrameTime helped a little (0.72 vs 0.69) but lengthens the wait of
//     small envelopes on LANs. Earlier: a longer bandwidth filter, 1 MiB
//     write batches and a larger window made no difference; grants per a
//     sixteenth of the window alone stalled at 14 MB/s. The layers above
//     do not call Release yet (internal/remote could, once a payload is
//     decoded).
//   - Head-of-line: the p50 of ~4.5 ms is the cwnd floor (32 KiB) standing
//     at the bottleneck; p99 swings with machine load. After an idle spell
//     a token bucket's burst inflates the bandwidth estimate (190 MB/s on
//     the 6.25 MB/s link) for ten round trips, and the window with it (2 ×
//     that × min RTT); grown frames and the aggregation room already use a
//     sustained rate the burst cannot inflate, but the window does not. A
//     cap of the window at twice the sustained rate × min RTT kept it small
//     after ProbeRTT and app-limited spells, and, with those spells
//     skipped, spiralled down to 9% of the link where credit returns in
//     bursts longer than the min RTT (loopback; the flow test
//     WindowCovers). Something like BBR's long-term (policer) rate, which
//     engages only when it detects a policer, would fix it.
//   - A Send to a newer incarnation drops the old session; if the old
//     process is in fact still up, the new session may meet it again and
//     deliver there (addressing is by address, not identity, once queued).
//   - Metrics (prometheus.Registerer in Config).
//   - Abort records of partly sent, cancelled envelopes stay in the resend
//     buffer until credit passes them; they are rewritten after a resume
//     whether or not the peer saw them (receivers ignore unknown ids).
//   - Bound the send queue by envelope count as well as bytes (600k tiny
//     envelopes make the maps cache-unfriendly).
package wire
