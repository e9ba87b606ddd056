package flow

import (
	"fmt"
	"time"
)

// Default credit parameters. They match the transport's handshake defaults.
const (
	// DefaultWindow is the initial per-stream window in bytes (256 KiB).
	DefaultWindow = 256 << 10
	// DefaultMaxWindow is the largest window auto-tuning grows to (8 MiB).
	DefaultMaxWindow = 8 << 20
	// DefaultGrantBytes is the least number of consumed or received bytes
	// that make a grant due on their own, by default (32 KiB); larger windows
	// use a sixteenth of the window.
	DefaultGrantBytes = 32 << 10
	// DefaultGrantDelay is how long a grant may wait for more consumption
	// before it is due anyway (2 ms).
	DefaultGrantDelay = 2 * time.Millisecond
)

// Grant is the content of a credit frame: the receiver's cumulative counts of
// consumed and received bytes on one stream, and its current window. All
// only grow, so a grant is idempotent: applying an old or duplicated one
// changes nothing, and a grant can be repeated on a new connection after a
// resume.
type Grant struct {
	// Consumed is the cumulative number of uncompressed payload bytes the
	// receiver has consumed (or credited early) on the stream. Credit is
	// computed from it.
	Consumed int64
	// Window is the receiver's window in bytes. The sender may have at most
	// Window bytes sent but not consumed.
	Window int64
	// Received is the cumulative number of payload bytes the receiver has
	// read from the connection, at least Consumed. It acknowledges the path
	// for the [Estimator], which must not mistake a slow consumer for a slow
	// link. Zero means "not carried": the estimator then uses Consumed.
	Received int64
}

// acked returns what the grant acknowledges as delivered by the path.
func (g Grant) acked() int64 { return max(g.Received, g.Consumed) }

// SendCredit is the sender's view of one stream's credit, in uncompressed
// payload bytes: available = window - (sent - consumedByPeer).
//
// It is not safe for concurrent use; the session serialises calls.
type SendCredit struct {
	window    int64
	maxWindow int64
	sent      int64
	consumed  int64
}

// NewSendCredit returns the credit of a fresh stream whose receiver starts
// with window bytes and may grow it up to maxWindow bytes (growth beyond is
// clamped, which bounds the sender's resend buffer). A window of 0 means
// [DefaultWindow]; a maxWindow below the window means no growth.
func NewSendCredit(window, maxWindow int64) SendCredit {
	if window <= 0 {
		window = DefaultWindow
	}
	if maxWindow < window {
		maxWindow = window
	}
	return SendCredit{window: window, maxWindow: maxWindow}
}

// Available returns how many bytes may be sent now. It is never negative and
// never more than [SendCredit.Window].
func (c *SendCredit) Available() int64 { return c.window - (c.sent - c.consumed) }

// Window returns the window in bytes as last granted by the peer.
func (c *SendCredit) Window() int64 { return c.window }

// Sent returns the cumulative number of bytes sent on the stream: the stream
// offset of the next byte.
func (c *SendCredit) Sent() int64 { return c.sent }

// Consumed returns the cumulative number of bytes the peer has said it
// consumed.
func (c *SendCredit) Consumed() int64 { return c.consumed }

// Spend records that n bytes are being sent. It fails with
// [ErrCreditExhausted] if n exceeds [SendCredit.Available].
func (c *SendCredit) Spend(n int64) error {
	if n < 0 || n > c.Available() {
		return fmt.Errorf("%w: spending %d bytes with %d available", ErrCreditExhausted, n, c.Available())
	}
	c.sent += n
	return nil
}

// Apply applies a grant from the peer and reports whether it added credit.
// Stale and duplicate grants are ignored. A grant that claims more bytes
// consumed than were sent, or a non-positive window, fails with
// [ErrInvalidGrant] and changes nothing.
func (c *SendCredit) Apply(g Grant) (grew bool, err error) {
	if g.Consumed > c.sent {
		return false, fmt.Errorf("%w: peer consumed %d bytes but only %d were sent", ErrInvalidGrant, g.Consumed, c.sent)
	}
	if g.Window <= 0 {
		return false, fmt.Errorf("%w: window %d", ErrInvalidGrant, g.Window)
	}
	if g.Received > c.sent || (g.Received != 0 && g.Received < g.Consumed) {
		return false, fmt.Errorf("%w: peer received %d of %d sent and consumed %d", ErrInvalidGrant, g.Received, c.sent, g.Consumed)
	}
	before := c.Available()
	if g.Consumed > c.consumed {
		c.consumed = g.Consumed
	}
	if w := min(g.Window, c.maxWindow); w > c.window {
		c.window = w
	}
	return c.Available() > before, nil
}

// Resume checks the byte count the peer says it received, carried by the
// handshake of a new connection, and returns the stream offset from which the
// session must resend. The count must lie between what the peer already said
// it consumed and what was sent; otherwise it fails with [ErrResumeOffset]
// (the peer is not the process it was, or the counts are corrupt). Credit
// itself needs no change: resent bytes keep their stream offsets, so they were
// paid for when first sent.
func (c *SendCredit) Resume(peerReceived int64) (resendFrom int64, err error) {
	if peerReceived < c.consumed || peerReceived > c.sent {
		return 0, fmt.Errorf("%w: peer received %d, consumed %d, sent %d", ErrResumeOffset, peerReceived, c.consumed, c.sent)
	}
	return peerReceived, nil
}

// RecvConfig configures a [RecvCredit]. The zero value means the defaults.
type RecvConfig struct {
	// Window is the initial window in bytes, agreed at the handshake.
	// Default [DefaultWindow].
	Window int64
	// MaxWindow is the cap for window auto-tuning, in bytes. Default
	// [DefaultMaxWindow]; a value equal to Window turns auto-tuning off.
	MaxWindow int64
	// GrantBytes is how many newly consumed, or newly received, bytes make a
	// grant due at once. By default it follows the window as auto-tuning
	// grows it: max([DefaultGrantBytes], window/16), and at most half the
	// window, so a fast stream does not send a credit frame every 32 KiB.
	// A sender held by its congestion window below GrantBytes waits up to
	// GrantDelay for its grant.
	GrantBytes int64
	// GrantDelay is how long newly consumed or received bytes may wait for
	// more before a grant is due anyway. Default [DefaultGrantDelay].
	GrantDelay time.Duration
	// Slack is how many consumed bytes may wait for the next grant with
	// no deadline: while fewer wait and no envelope is held,
	// [RecvCredit.Deadline] is zero and the grant goes with the next one
	// (the session's data, a pong, more consumption), so a request and
	// reply exchange arms no timer per message. At most Window/8; the
	// sender's congestion window floor (EstimatorConfig.MinCwnd) must
	// exceed Slack summed over the streams (see Deadline). Default 0:
	// every byte waiting has a deadline.
	Slack int64
}

func (c RecvConfig) withDefaults() RecvConfig {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.MaxWindow == 0 {
		c.MaxWindow = max(DefaultMaxWindow, c.Window)
	}
	if c.GrantDelay == 0 {
		c.GrantDelay = DefaultGrantDelay
	}
	return c
}

// Validate reports the first field that makes no sense, wrapping
// [ErrInvalidConfig]. Zero fields are valid: they mean the default.
func (c RecvConfig) Validate() error {
	switch d := c.withDefaults(); {
	case c.Window < 0:
		return fmt.Errorf("%w: RecvConfig.Window %d is negative", ErrInvalidConfig, c.Window)
	case d.MaxWindow < d.Window:
		return fmt.Errorf("%w: RecvConfig.MaxWindow %d is below Window %d", ErrInvalidConfig, c.MaxWindow, d.Window)
	case c.GrantBytes < 0 || d.GrantBytes > d.Window:
		return fmt.Errorf("%w: RecvConfig.GrantBytes %d is outside 1..Window", ErrInvalidConfig, c.GrantBytes)
	case c.GrantDelay < 0:
		return fmt.Errorf("%w: RecvConfig.GrantDelay %v is negative", ErrInvalidConfig, c.GrantDelay)
	case c.Slack < 0 || d.Slack > d.Window/8:
		return fmt.Errorf("%w: RecvConfig.Slack %d is outside 0..Window/8", ErrInvalidConfig, c.Slack)
	}
	return nil
}

// RecvCredit is the receiver's side of one stream's credit.
//
// Bytes of a frame that leaves its envelope incomplete are credited on
// arrival, so an envelope larger than the window cannot stall; bytes of the
// frame that completes an envelope are held until the application consumes
// the envelope. While the complete envelopes the application has not
// consumed total a window or more, the bytes of incomplete ones wait for
// their credit too, until consumption brings that total below the window:
// so a peer cannot make us hold more than two windows of complete
// envelopes unread, plus the rest of the envelopes it had started, however
// slowly the application reads. Without that rule, complete envelopes
// counted by their last frame only, and a slow reader could be made to hold
// any number of them. No deadlock comes of it: while the waiting bytes are
// withheld, complete envelopes are there for the application to consume,
// and each consumption looks at the waiting bytes again.
//
// The receiver grants credit by sending [Grant]s; [RecvCredit.Grant] says when
// one is worth sending. The window grows toward the bandwidth-delay product
// when the peer uses it up within a few round trips (as quic-go does).
//
// It is not safe for concurrent use; the session serialises calls. It
// survives a resume: keep it across connections and call
// [RecvCredit.Resume].
type RecvCredit struct {
	cfg      RecvConfig
	window   int64
	received int64
	consumed int64
	held     int64
	// unread is the bytes of complete envelopes not yet consumed, whole;
	// waiting is the bytes of incomplete envelopes that arrived while
	// unread was a window or more, not yet credited.
	unread  int64
	waiting int64
	adv     Grant // last grant handed out (initially the handshake window)
	forced  bool
	// pendingSince is when consumed or received first went past the last
	// grant.
	pendingSince time.Time
	// Auto-tuning epoch: when it started and the consumed count then.
	epochStart  time.Time
	epochOffset int64
}

// Held is what a complete envelope holds of a stream's credit until the
// application consumes it: its last frame's bytes, and its whole size.
// [RecvCredit.Arrive] returns it; [RecvCredit.Consume] takes it back.
type Held struct {
	Frame    int64
	Envelope int64
}

// grantBytes returns the GrantBytes threshold for the current window.
func (r *RecvCredit) grantBytes() int64 {
	if r.cfg.GrantBytes > 0 {
		return r.cfg.GrantBytes
	}
	return max(min(max(DefaultGrantBytes, r.window/16), r.window/2), 1)
}

// NewRecvCredit returns the receiver credit of a fresh stream.
func NewRecvCredit(cfg RecvConfig) (RecvCredit, error) {
	if err := cfg.Validate(); err != nil {
		return RecvCredit{}, err
	}
	cfg = cfg.withDefaults()
	return RecvCredit{cfg: cfg, window: cfg.Window, adv: Grant{Window: cfg.Window}}, nil
}

// Arrive records a data frame of n payload bytes. last says whether the
// frame completes its envelope, of size bytes in all (read only then; at
// least n). If it does not, its bytes are credited at once, or once the
// complete envelopes not consumed total less than the window (see
// [RecvCredit]), and the returned Held is zero; if it does, its bytes are
// held until the application consumes the envelope, and the caller must
// pass the returned Held to [RecvCredit.Consume] then (also when it drops
// the envelope undelivered). A frame beyond the granted window fails with
// [ErrCreditOverrun] and is not recorded.
func (r *RecvCredit) Arrive(n int64, last bool, size int64, now time.Time) (Held, error) {
	if n < 0 {
		return Held{}, fmt.Errorf("%w: negative frame length %d", ErrCreditOverrun, n)
	}
	if limit := r.adv.Consumed + r.adv.Window; r.received+n > limit {
		return Held{}, fmt.Errorf("%w: %d bytes at offset %d, granted up to %d", ErrCreditOverrun, n, r.received, limit)
	}
	if n > 0 && !r.pending() {
		r.pendingSince = now
	}
	r.received += n
	if last {
		h := Held{Frame: n, Envelope: max(size, n)}
		r.held += h.Frame
		r.unread += h.Envelope
		return h, nil
	}
	if r.unread >= r.window {
		r.waiting += n
		return Held{}, nil
	}
	r.credit(n, now)
	return Held{}, nil
}

// Consume credits the held bytes of a complete envelope that the
// application consumed, and the bytes of incomplete envelopes that waited
// while complete ones were unread, once those total less than the window.
// It fails with [ErrConsumeUnheld] if fewer bytes are held.
func (r *RecvCredit) Consume(h Held, now time.Time) error {
	if h.Frame < 0 || h.Frame > r.held || h.Envelope < h.Frame || h.Envelope > r.unread {
		return fmt.Errorf("%w: consuming %d (of an envelope of %d) with %d held (%d unread)", ErrConsumeUnheld, h.Frame, h.Envelope, r.held, r.unread)
	}
	r.held -= h.Frame
	r.unread -= h.Envelope
	r.credit(h.Frame, now)
	r.release(now)
	return nil
}

// release credits the bytes of incomplete envelopes that waited, if the
// complete envelopes not consumed now total less than the window.
func (r *RecvCredit) release(now time.Time) {
	if r.waiting > 0 && r.unread < r.window {
		r.credit(r.waiting, now)
		r.waiting = 0
	}
}

func (r *RecvCredit) credit(n int64, now time.Time) {
	if n == 0 {
		return
	}
	if !r.pending() {
		r.pendingSince = now
	}
	r.consumed += n
}

// pending reports whether bytes were consumed or received since the last
// grant.
func (r *RecvCredit) pending() bool {
	return r.consumed > r.adv.Consumed || r.received > r.adv.Received
}

// Grant returns the grant to send now, if one is worth sending, and records it
// as sent. A grant is worth sending when GrantBytes were consumed or received
// since the last one, when the peer may be blocked (less than GrantBytes of
// its credit left) and anything was consumed, when consumed or received bytes
// waited GrantDelay, when the window grew, and after [RecvCredit.Resume].
// Grants for received bytes keep the sender's estimator measuring the path
// while the application consumes slowly. rtt is the current round trip
// estimate (0 if unknown) used to auto-tune the window; now is the current
// time.
func (r *RecvCredit) Grant(now time.Time, rtt time.Duration) (g Grant, ok bool) {
	if !r.forced && !r.pending() && r.window == r.adv.Window {
		// Nothing since the last grant (the usual case for the idle
		// streams, looked at for every batch of frames written): the
		// checks below would all fail, as grantBytes is at least 1.
		return Grant{}, false
	}
	delta := r.consumed - r.adv.Consumed
	remaining := r.adv.Consumed + r.adv.Window - r.received
	every := r.grantBytes()
	due := r.forced ||
		delta >= every ||
		r.received-r.adv.Received >= every ||
		(delta > 0 && remaining < every) ||
		(r.pending() && !now.Before(r.pendingSince.Add(r.cfg.GrantDelay)))
	if delta > 0 {
		r.autoTune(now, rtt)
	}
	// A window grown past what is unread credits what waited; the grant
	// goes, as for any grown window.
	r.release(now)
	if !due && r.window == r.adv.Window {
		return Grant{}, false
	}
	r.adv = Grant{Consumed: r.consumed, Window: r.window, Received: r.received}
	r.forced = false
	return r.adv, true
}

// autoTune doubles the window when more than half of it was consumed in less
// than four round trips' worth of time for that fraction: the window, not the
// link, was then the limit.
func (r *RecvCredit) autoTune(now time.Time, rtt time.Duration) {
	if r.epochStart.IsZero() {
		r.epochStart, r.epochOffset = now, r.adv.Consumed
	}
	inEpoch := r.consumed - r.epochOffset
	if inEpoch <= r.window/2 {
		return
	}
	fraction := float64(inEpoch) / float64(r.window)
	if rtt > 0 && now.Sub(r.epochStart) < time.Duration(4*fraction*float64(rtt)) {
		r.window = min(2*r.window, r.cfg.MaxWindow)
	}
	r.epochStart, r.epochOffset = now, r.consumed
}

// Deadline returns when a grant becomes due by GrantDelay, or the zero time
// if none needs a timer: no consumed or received bytes wait, or what waits
// is slack (fewer than Slack consumed bytes, no envelope held; see below).
// The session arms a timer for a non-zero deadline and then calls
// [RecvCredit.Grant]; a slack grant goes with the next grant or data
// frame. After [RecvCredit.Resume] the time returned is already past: a
// grant is due at once.
//
// Why a slack grant cannot stall the sender. With nothing held or
// waiting, every byte received was consumed (received = consumed + held +
// waiting), so the sender
// has had fewer than Slack bytes neither credited nor acknowledged on the
// stream since its last grant: its credit is at least Window-Slack, which
// fits a frame (Slack is at most Window/8, and a frame is cut short to
// what is available once an eighth of the window is), and its in-flight
// count, summed over the streams, stays below its congestion window floor
// if that exceeds Slack times the streams. Bytes still on the way change
// the counts when they arrive or are consumed, and the caller looks at
// Deadline again then (an envelope held, or Slack crossed, makes it
// non-zero again). So the slack alone never stops the sender, and what
// it sends brings the next grant. Held bytes on another stream add to
// its in-flight count: with an envelope of nearly the floor held by a
// handler that blocks, the sender can stop until that stream's grant
// (its receiver acknowledges what it read when it drains the socket, or
// once relief takes over reading), as it could before for the floor
// held alone. A receipt the sender waits on is not covered:
// the session asks for its grant (an ack ping) when its envelope is the
// last written, and any earlier one lies more than Slack before the end,
// so its bytes were granted already, or are still held or waiting. Bytes
// waiting (see RecvCredit) are credited as a whole, not by envelope: an
// envelope consumed while a window of others waits unread has its
// receipt resolved only once enough of those are consumed too.
func (r *RecvCredit) Deadline() time.Time {
	if !r.pending() && !r.forced || r.slack() {
		return time.Time{}
	}
	return r.pendingSince.Add(r.cfg.GrantDelay)
}

// slack reports whether what waits for a grant needs no deadline (see
// Deadline): received is consumed when nothing is held, and the last
// grant's received count is at least its consumed count, so the
// received bytes waiting are no more than the consumed ones.
func (r *RecvCredit) slack() bool {
	return !r.forced && r.held == 0 && r.waiting == 0 && r.consumed-r.adv.Consumed < r.cfg.Slack && r.window == r.adv.Window
}

// Slack returns the configured [RecvConfig.Slack].
func (r *RecvCredit) Slack() int64 { return r.cfg.Slack }

// Resume prepares the stream for a new connection: the last grant may have
// been lost with the old one, so the next call to [RecvCredit.Grant] returns a
// grant whatever was consumed. The received count ([RecvCredit.Received]) is
// what the resume handshake carries.
func (r *RecvCredit) Resume() { r.forced = true }

// Received returns the cumulative number of payload bytes received on the
// stream: the offset from which the peer resends after a resume.
func (r *RecvCredit) Received() int64 { return r.received }

// Consumed returns the cumulative number of bytes credited so far, granted or
// not.
func (r *RecvCredit) Consumed() int64 { return r.consumed }

// Held returns the bytes of complete envelopes' last frames not yet
// consumed: what of them the peer's credit still counts.
func (r *RecvCredit) Held() int64 { return r.held }

// Unread returns the bytes of complete envelopes not yet consumed, whole.
func (r *RecvCredit) Unread() int64 { return r.unread }

// Waiting returns the bytes of incomplete envelopes whose credit waits
// for the application to consume complete ones.
func (r *RecvCredit) Waiting() int64 { return r.waiting }

// Window returns the current window in bytes (possibly not yet granted).
func (r *RecvCredit) Window() int64 { return r.window }

// Granted returns the last grant handed out by [RecvCredit.Grant] (initially
// the handshake window with nothing consumed).
func (r *RecvCredit) Granted() Grant { return r.adv }

// GrantEarly returns a grant for whatever was consumed or received since
// the last one, due or not, and records it as sent; false if nothing was.
// A sender that writes data anyway adds it for the price of a few bytes,
// sparing the grant's own write when it falls due.
func (r *RecvCredit) GrantEarly(now time.Time, rtt time.Duration) (Grant, bool) {
	if !r.pending() && !r.forced {
		return Grant{}, false
	}
	r.forced = true
	return r.Grant(now, rtt)
}
