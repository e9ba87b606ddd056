// Package flow is the deterministic core of the transport's flow control,
// pacing and frame scheduling: per-stream byte credit, a BBR-style path
// estimator, a pacer, and the scheduler that decides which frame a
// connection writes next.
//
// Nothing here starts a goroutine, reads a clock or touches a socket. The
// session passes the time in as [time.Time] values, feeds in what arrived
// (grants, frames, ping RTTs) and does what the results say (write this
// frame, wait this long, send this grant). Every type is single-threaded:
// the session serialises all calls on it, typically from its writer loop.
//
// # Units
//
// Credit, windows, frame sizes, in-flight and queued amounts are counts of
// uncompressed payload bytes: what compression and TLS do to them is not
// counted, so the counts mean the same on both sides and across
// connections. Offsets and counts are cumulative per stream, from the
// stream's first byte, as int64. Rates are bytes per second as float64.
// Durations are [time.Duration].
//
// # Credit
//
// Each stream has a window, agreed at the handshake (256 KiB by default). The
// sender ([SendCredit]) may have at most a window of bytes sent and not yet
// consumed by the receiver: available = window - (sent - consumed). The
// receiver ([RecvCredit]) grants credit with a [Grant]: its cumulative
// consumed count, its current window, and its cumulative received count. All
// only grow, so grants are idempotent: a stale or duplicated grant changes
// nothing, and the last one can be repeated on a new connection. A grant
// claiming more than was sent is [ErrInvalidGrant]; bytes beyond the granted
// window are [ErrCreditOverrun]. Both are protocol errors: close the
// connection.
//
// The received count is what lets the sender tell a slow link from a slow
// consumer: credit follows consumption, but the estimator measures the path
// from what was received. A credit frame should carry all three fields; a
// grant with Received 0 is accepted and measured by Consumed, and then a
// consumer slower than the link drags the pacing rate of the whole connection
// down to its own.
//
// The receiver credits the bytes of a frame that leaves its envelope
// incomplete as soon as it arrives, so an envelope larger than the window
// cannot stall; it holds the bytes of the frame that completes an envelope
// until the application has consumed the envelope. While complete envelopes
// of a window or more wait unread, the bytes of incomplete ones wait for
// their credit too, until the application consumes: a peer can make a
// receiver hold at most two windows of complete envelopes unread, plus the
// envelopes it had started ([RecvCredit] argues it). [RecvCredit.Grant] says when a grant is
// worth a frame: GrantBytes (by default a sixteenth of the window, at least
// 32 KiB and at most half the window) consumed or received since the last one,
// anything consumed while the peer has less than GrantBytes of credit left,
// anything consumed or received GrantDelay (2 ms) ago, or a grown window.
// Frequent grants matter: they are the estimator's acknowledgements. With
// RecvConfig.Slack set, fewer consumed bytes than that, with no envelope
// held, have no deadline ([RecvCredit.Deadline] argues why the sender
// cannot stall if its congestion window floor exceeds Slack times the
// streams): their grant goes with the receiver's next frames.
//
// The receiver auto-tunes its window toward the bandwidth-delay product, as
// quic-go does: when more than half the window was consumed in less than four
// round trips' worth of time, the window doubles, up to MaxWindow (8 MiB by
// default; the transport sets it to the agreed window).
// A fixed 256 KiB window would cap a stream at 5 MB/s on a 50 ms path. The
// sender clamps window growth to its own MaxWindow, which bounds its resend
// buffer: a stream's resend buffer holds the bytes from Consumed to Sent, at
// most one window.
//
// # Estimation
//
// [Estimator] follows BBR (Cardwell et al.). Each frame written is recorded
// under its stream byte offset with its send time, the bytes delivered so far
// and whether the sender was app-limited (nothing queued) or credit-limited
// (the peer's credit, not the congestion window, held it back). A grant that
// moves a stream's received count acknowledges the frames below it and
// yields a delivery-rate sample: bytes delivered over the longer
// of the send and acknowledgement intervals. The bandwidth estimate is the
// maximum sample over about ten round trips; a sample from an app- or
// credit-limited send may raise it but never lowers it, since it measures the
// application or the receiver, not the path. The path delay is the minimum
// RTT over about ten seconds, fed by frames and by pings ([Estimator.OnRTT]);
// when no sample has matched it for ten seconds, ProbeRTT holds in-flight at
// MinCwnd for 200 ms and a round trip so the queue drains and the path's
// delay is seen again (this is what keeps connections that share a
// bottleneck from inflating each other's RTT without bound).
//
// Startup paces at 2.885 times the estimate (doubling per round trip) until
// the estimate grows less than 25% over three rounds; drain then empties the
// queue startup built; the steady state paces at the estimate, probing at
// ProbeGain (1.1) one round trip in eight and draining after each probe
// until in-flight is back to one BDP. BBR probes at 1.25 and drains for a
// fixed round trip; both leave queues that a small envelope waits behind.
// The congestion window is two bandwidth-delay products with a floor of
// MinCwnd (64 KiB, four frames; it must be at least the peer's GrantBytes).
//
// # Pacing
//
// [Pacer] is a token bucket refilled at the pacing rate that holds two frames
// or one millisecond of sending, whichever is more (so a writer on a coarse
// timer can still fill a fast link); a frame larger than the bucket may go
// when the bucket is full and leaves it in debt, so the long-run rate is
// exact. Control and membership ([Class.Bypasses]) never wait for it, but
// their bytes are charged, so the connection as a whole keeps to the pace.
//
// # Scheduling
//
// [Scheduler] holds the queued envelopes of all streams of a peer and decides
// the next frame. The order is: aborts of cancelled envelopes; control
// streams; membership streams; then data streams (application, replication,
// and any others), which alone are held by the congestion window and the
// pacer. Within each class, envelopes that fit in one frame (at most MaxFrame
// bytes, 16 KiB by default) go before frames of larger envelopes; large
// envelopes are split into MaxFrame frames that interleave round robin, and
// data streams take turns, so a small message waits for at most about the
// frame being written, whatever is queued. Per (stream, key) an envelope
// starts only after the previous one of that key is fully written, so
// messages from one node to one key arrive in order; [Scheduler.EnqueueAfter]
// also holds an envelope until what another key holds now is written,
// without holding that key's later envelopes. Every stream spends its
// own credit; a frame is cut short to fit the credit only if at least an
// eighth of the window is available, to avoid a trickle of tiny frames.
// On a slow path (MaxFrame takes more than a millisecond at the sustained
// rate) a large envelope's frame is also cut to the congestion window's
// room (at least a quarter of MaxFrame): a frame that overran the window would stand in
// the bottleneck's queue in front of the next small envelope.
//
// Frames carry the stream, a per-stream envelope id (assigned when the
// envelope's first frame is written, so ids increase in the order envelopes
// start on the wire), First and Last flags, the payload's offset and length
// within the envelope (and the payload sub-slice when the envelope was
// enqueued with its bytes), and the stream offset of the payload's first byte.
//
// [Scheduler.Cancel] drops what was not yet written of an envelope whose
// caller stopped waiting. If none of it was written it vanishes; if some was,
// the scheduler emits a [FrameAbort] so the receiver discards the partial
// envelope. Receivers must ignore aborts for envelopes they do not hold.
//
// In steady state the scheduler does not allocate: envelopes live in a slab
// of reused slots linked into intrusive lists, and the per-key map only grows
// to the number of keys with queued envelopes.
//
// # Integration
//
// A session keeps, per peer and across connections, one [Scheduler] (which
// owns the [Estimator], the [Pacer] and a [SendCredit] per stream) and one
// [RecvCredit] per stream. Its writer loop:
//
//	// Credit, ping and pong frames are the session's own: write them first.
//	for {
//		f, wait, ok := sched.Next(now)
//		if !ok {
//			// wait > 0: arm a timer for it. wait == 0: sleep until an
//			// Enqueue, Cancel or grant.
//			break
//		}
//		// Keep data and abort frames in the resend buffer under
//		// (f.Stream, f.StreamOffset) until the peer credits them.
//		write(f)
//	}
//
// On a grant frame: sched.ApplyGrant(stream, grant, now), then run the writer
// loop. On a data frame read completely: held, err := recv.Arrive(len, last,
// size, now) (size: the whole envelope's, when last); when the application
// has taken the envelope (or it was dropped): recv.Consume(held, now); after either, and when recv.Deadline() passes:
// if g, ok := recv.Grant(now, sched.Estimator().MinRTT()); ok, write a credit
// frame carrying all three of g's counts (Received too: see Credit). On a
// pong: sched.Estimator().OnRTT(rtt, now).
//
// On resume, after fencing the old connection: call recv.Resume() on every
// stream and send recv.Received() in the handshake; with the peer's counts,
// from, err := sched.ResumeStream(stream, peerReceived) (an error means the
// resume is impossible: fail the pending envelopes); sched.Resume(now); then
// write the resend buffer's frames from offset from (and frames without
// payload at exactly from, which may or may not have arrived), each when
// sched.Resend(stream, offset, len, now) returns no wait, before any new
// frame. Count a frame as received only once it was read whole, so resend
// offsets fall on frame boundaries.
//
// # Status
//
// Built and tested: credit arithmetic and grant policy with auto-tuning
// (table tests, a rapid property); the estimator alone (unit tests, a rapid
// property) and on a simulated link in virtual time (convergence on four
// links, app- and credit-limited phases, rate drop and rise, in-flight
// bound, ProbeRTT, a 10 Gbit/s link with a 1 ms timer, two connections
// sharing a bottleneck); the scheduler (unit tests, golden scenario scripts,
// a rapid property over random workloads, head-of-line latency, zero
// allocations); resume across cuts by the recipe above.
//
// Known gaps:
//   - Connections that share a bottleneck (one node's peers behind one
//     uplink) keep about one BDP queued between them, as BBR v1 flows do,
//     and a connection with a longer RTT takes more than its share; small
//     envelopes then wait behind that queue. Loss and ECN, which BBR v2 uses
//     to bound it, are invisible above TCP; a delay signal could serve.
//   - Ack aggregation from batched grants can overestimate the bandwidth by
//     a few percent for up to ten round trips (seen as 5% in startup at
//     50 Mbit/s); the probe drain removes the queue it causes.
//   - When a stream's credit is below one frame, the scheduler looks only
//     eight envelopes down its small queue for one that fits.
//   - No weights between data streams: application and replication take
//     equal turns while both have data.
//   - The wire session (as of this writing) sends credit frames without the
//     received count and records resent frames without pacing them; see
//     Credit and Integration.
//   - The resend buffer itself is the session's: the scheduler paces and
//     records resent frames ([Scheduler.Resend]) but does not hold them.
package flow
