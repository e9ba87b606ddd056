package flow

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Unix(1_000_000, 0)

// fataler is what testing.T and rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// testFrame is a data frame on its way to a receiver: its bytes, and
// whether it completes its envelope.
type testFrame struct {
	n    int64
	last bool
}

// reader feeds frames to a RecvCredit in order, summing each envelope's
// bytes for its last frame, and keeps what complete envelopes hold until
// the application consumes them.
type reader struct {
	r        *RecvCredit
	envelope int64 // bytes of the envelope under way
	held     []Held
}

func (rd *reader) arrive(f testFrame, now time.Time) error {
	rd.envelope += f.n
	h, err := rd.r.Arrive(f.n, f.last, rd.envelope, now)
	if err != nil {
		return err
	}
	if f.last {
		rd.held = append(rd.held, h)
		rd.envelope = 0
	}
	return nil
}

// consume consumes the oldest complete envelope, if any.
func (rd *reader) consume(now time.Time) error {
	if len(rd.held) == 0 {
		return nil
	}
	h := rd.held[0]
	rd.held = rd.held[1:]
	return rd.r.Consume(h, now)
}

func mustRecv(t fataler, cfg RecvConfig) RecvCredit {
	t.Helper()
	r, err := NewRecvCredit(cfg)
	if err != nil {
		t.Fatalf("NewRecvCredit(%+v): %v", cfg, err)
	}
	return r
}

func TestSendCreditAvailableIsWindowMinusUnconsumed(t *testing.T) {
	tests := []struct {
		name      string
		window    int64
		spend     []int64
		grant     Grant
		available int64
	}{
		{"fresh stream has the whole window", 100, nil, Grant{Consumed: 0, Window: 100}, 100},
		{"sending takes credit", 100, []int64{30, 20}, Grant{Consumed: 0, Window: 100}, 50},
		{"a grant returns consumed bytes", 100, []int64{30, 20}, Grant{Consumed: 40, Window: 100}, 90},
		{"all consumed restores the window", 100, []int64{100}, Grant{Consumed: 100, Window: 100}, 100},
		{"a larger window adds credit", 100, []int64{100}, Grant{Consumed: 50, Window: 200}, 150},
		{"a smaller window is ignored", 100, []int64{60}, Grant{Consumed: 0, Window: 50}, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewSendCredit(tt.window, 1000)
			for _, n := range tt.spend {
				if err := c.Spend(n); err != nil {
					t.Fatalf("Spend(%d): %v", n, err)
				}
			}
			if _, err := c.Apply(tt.grant); err != nil {
				t.Fatalf("Apply(%+v): %v", tt.grant, err)
			}
			if got := c.Available(); got != tt.available {
				t.Errorf("Available() = %d, want %d", got, tt.available)
			}
		})
	}
}

func TestSendCreditIgnoresStaleAndDuplicateGrants(t *testing.T) {
	c := NewSendCredit(100, 100)
	_ = c.Spend(100)
	for _, g := range []Grant{{Consumed: 60, Window: 100}, {Consumed: 60, Window: 100}, {Consumed: 30, Window: 100}, {Consumed: 0, Window: 100}} {
		if _, err := c.Apply(g); err != nil {
			t.Fatalf("Apply(%+v): %v", g, err)
		}
	}
	if got := c.Available(); got != 60 {
		t.Errorf("after grants 60, 60 (duplicate), 30 and 0 (stale): Available() = %d, want 60", got)
	}
}

func TestSendCreditRejectsGrantClaimingMoreThanSent(t *testing.T) {
	c := NewSendCredit(100, 100)
	_ = c.Spend(10)
	if _, err := c.Apply(Grant{Consumed: 11, Window: 100}); !errors.Is(err, ErrInvalidGrant) {
		t.Fatalf("Apply(consumed 11 of 10 sent) = %v, want ErrInvalidGrant", err)
	}
	if c.Available() != 90 || c.Consumed() != 0 {
		t.Errorf("a rejected grant changed the credit: available %d consumed %d, want 90 and 0", c.Available(), c.Consumed())
	}
	if _, err := c.Apply(Grant{Consumed: 5, Window: 0}); !errors.Is(err, ErrInvalidGrant) {
		t.Errorf("Apply(window 0) = %v, want ErrInvalidGrant", err)
	}
}

func TestSendCreditRefusesSpendBeyondAvailable(t *testing.T) {
	c := NewSendCredit(100, 100)
	if err := c.Spend(101); !errors.Is(err, ErrCreditExhausted) {
		t.Errorf("Spend(101) with 100 available = %v, want ErrCreditExhausted", err)
	}
	if c.Sent() != 0 {
		t.Errorf("a refused spend counted as sent: Sent() = %d, want 0", c.Sent())
	}
}

func TestSendCreditClampsWindowGrowthToMaxWindow(t *testing.T) {
	c := NewSendCredit(100, 400)
	if _, err := c.Apply(Grant{Window: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if got := c.Window(); got != 400 {
		t.Errorf("Window() after a 1 GiB grant with MaxWindow 400 = %d, want 400", got)
	}
}

func TestSendCreditResumeAcceptsOnlyOffsetsBetweenConsumedAndSent(t *testing.T) {
	c := NewSendCredit(100, 100)
	_ = c.Spend(80)
	_, _ = c.Apply(Grant{Consumed: 30, Window: 100})
	for _, tt := range []struct {
		received int64
		ok       bool
	}{{29, false}, {30, true}, {55, true}, {80, true}, {81, false}} {
		from, err := c.Resume(tt.received)
		switch {
		case tt.ok && (err != nil || from != tt.received):
			t.Errorf("Resume(%d) = %d, %v; want resend from %d", tt.received, from, err, tt.received)
		case !tt.ok && !errors.Is(err, ErrResumeOffset):
			t.Errorf("Resume(%d) with consumed 30 and sent 80 = %v, want ErrResumeOffset", tt.received, err)
		}
	}
}

func TestRecvCreditRejectsOverrun(t *testing.T) {
	tests := []struct {
		name   string
		frames []int64
		last   bool
		ok     bool
	}{
		{"exactly the window", []int64{60, 40}, true, true},
		{"one byte past the window", []int64{60, 41}, true, false},
		{"incomplete envelope bytes still need credit", []int64{100, 1}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRecv(t, RecvConfig{Window: 100, MaxWindow: 100})
			var err error
			for _, n := range tt.frames {
				if _, err = r.Arrive(n, tt.last, n, t0); err != nil {
					break
				}
			}
			if tt.ok && err != nil {
				t.Errorf("frames %v within a 100-byte window: %v", tt.frames, err)
			}
			if !tt.ok && !errors.Is(err, ErrCreditOverrun) {
				t.Errorf("frames %v beyond a 100-byte window: err = %v, want ErrCreditOverrun", tt.frames, err)
			}
		})
	}
}

func TestRecvCreditHoldsCompleteEnvelopeUntilConsumed(t *testing.T) {
	r := mustRecv(t, RecvConfig{Window: 100, MaxWindow: 100, GrantBytes: 50})
	held, err := r.Arrive(70, true, 70, t0)
	if err != nil || held != (Held{70, 70}) {
		t.Fatalf("Arrive(70, last) = %d, %v; want 70 held", held, err)
	}
	if g, _ := r.Grant(t0, 0); g.Consumed != 0 || g.Received != 70 {
		t.Fatalf("Grant before consumption = %+v; want 70 received acknowledged and nothing credited", g)
	}
	if err := r.Consume(Held{70, 70}, t0); err != nil {
		t.Fatal(err)
	}
	g, ok := r.Grant(t0, 0)
	if !ok || g.Consumed != 70 {
		t.Errorf("Grant after consuming 70 = %+v, %v; want consumed 70", g, ok)
	}
	if err := r.Consume(Held{1, 1}, t0); !errors.Is(err, ErrConsumeUnheld) {
		t.Errorf("Consume(1) with nothing held = %v, want ErrConsumeUnheld", err)
	}
}

// An envelope larger than the window must cross with no consumption by the
// application: bytes of the incomplete envelope are credited on arrival.
func TestEnvelopeLargerThanWindowDoesNotStall(t *testing.T) {
	const window, envelope, frame = 64 << 10, 1 << 20, 16 << 10
	send := NewSendCredit(window, window)
	recv := mustRecv(t, RecvConfig{Window: window, MaxWindow: window})
	now := t0
	written := 0
	for step := 0; written < envelope; step++ {
		if step > 10_000 {
			t.Fatalf("stalled after %d of %d bytes with %d credit", written, envelope, send.Available())
		}
		n := int(min(int64(frame), int64(envelope-written), send.Available()))
		if n > 0 {
			if err := send.Spend(int64(n)); err != nil {
				t.Fatal(err)
			}
			written += n
			if _, err := recv.Arrive(int64(n), written == envelope, int64(n), now); err != nil {
				t.Fatalf("Arrive at %d: %v", written, err)
			}
		}
		if g, ok := recv.Grant(now, 0); ok {
			if _, err := send.Apply(g); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(time.Millisecond)
	}
	if recv.Held() != frame {
		t.Errorf("held after the envelope arrived = %d, want only its last frame (%d)", recv.Held(), frame)
	}
}

func TestRecvCreditGrantIsDue(t *testing.T) {
	tests := []struct {
		name     string
		arrive   int64
		ackFirst bool // grant (acknowledge) the arrival before consuming
		consume  int64
		at       time.Duration
		want     Grant // zero: not due
	}{
		{"not before GrantBytes are consumed or received", 200, false, 100, 0, Grant{}},
		{"once GrantBytes are consumed", 300, true, 256, 0, Grant{Consumed: 256, Window: 1000, Received: 300}},
		{"once GrantBytes are received", 256, false, 0, 0, Grant{Consumed: 0, Window: 1000, Received: 256}},
		{"when the peer may be blocked", 850, true, 10, 0, Grant{Consumed: 10, Window: 1000, Received: 850}},
		{"after the grant delay", 200, false, 10, DefaultGrantDelay, Grant{Consumed: 10, Window: 1000, Received: 200}},
		{"not before the grant delay", 200, false, 10, DefaultGrantDelay - 1, Grant{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRecv(t, RecvConfig{Window: 1000, MaxWindow: 1000, GrantBytes: 256})
			if _, err := r.Arrive(tt.arrive, true, tt.arrive, t0); err != nil {
				t.Fatal(err)
			}
			if tt.ackFirst {
				if _, ok := r.Grant(t0, 0); !ok {
					t.Fatalf("receipt of %d bytes was not acknowledged", tt.arrive)
				}
			}
			if err := r.Consume(Held{tt.consume, tt.consume}, t0); err != nil {
				t.Fatal(err)
			}
			g, ok := r.Grant(t0.Add(tt.at), 0)
			if ok != (tt.want != Grant{}) || (ok && g != tt.want) {
				t.Errorf("Grant() = %+v, %v; want %+v (zero: none due)", g, ok, tt.want)
			}
		})
	}
}

func TestRecvCreditDeadlineIsGrantDelayAfterFirstUngrantedByte(t *testing.T) {
	r := mustRecv(t, RecvConfig{Window: 1000, MaxWindow: 1000, GrantBytes: 256})
	if !r.Deadline().IsZero() {
		t.Fatalf("Deadline() with nothing consumed = %v, want zero", r.Deadline())
	}
	_, _ = r.Arrive(20, true, 20, t0)
	_ = r.Consume(Held{10, 10}, t0)
	_ = r.Consume(Held{10, 10}, t0.Add(time.Millisecond))
	if want := t0.Add(DefaultGrantDelay); !r.Deadline().Equal(want) {
		t.Errorf("Deadline() = %v, want %v (GrantDelay after the first ungranted byte)", r.Deadline(), want)
	}
}

// Bytes consumed below Slack, with nothing held, need no deadline: the
// grant waits for the next one. Crossing Slack, holding an envelope or a
// resume brings the deadline back, still GrantDelay after the first byte
// that waits; Grant itself is unchanged (due after GrantDelay when asked).
func TestRecvCreditSlackNeedsNoDeadline(t *testing.T) {
	r := mustRecv(t, RecvConfig{Window: 1000, MaxWindow: 1000, GrantBytes: 256, Slack: 100})
	_, _ = r.Arrive(60, true, 60, t0)
	if r.Deadline().IsZero() {
		t.Fatal("Deadline() is zero with an envelope held")
	}
	_ = r.Consume(Held{60, 60}, t0)
	if d := r.Deadline(); !d.IsZero() {
		t.Fatalf("Deadline() = %v with 60 bytes consumed, Slack 100 and nothing held; want zero", d)
	}
	if g, ok := r.Grant(t0.Add(DefaultGrantDelay), 0); !ok || g.Consumed != 60 {
		t.Fatalf("Grant() after GrantDelay = %+v, %v; want the 60 bytes (riding along)", g, ok)
	}
	_, _ = r.Arrive(99, true, 99, t0.Add(time.Second))
	_ = r.Consume(Held{99, 99}, t0.Add(time.Second))
	if d := r.Deadline(); !d.IsZero() {
		t.Fatalf("Deadline() = %v with 99 bytes consumed; want zero", d)
	}
	_, _ = r.Arrive(1, true, 1, t0.Add(2*time.Second))
	if want := t0.Add(time.Second + DefaultGrantDelay); !r.Deadline().Equal(want) {
		t.Fatalf("Deadline() = %v with 1 byte held; want %v", r.Deadline(), want)
	}
	_ = r.Consume(Held{1, 1}, t0.Add(2*time.Second))
	if want := t0.Add(time.Second + DefaultGrantDelay); !r.Deadline().Equal(want) {
		t.Fatalf("Deadline() = %v with Slack reached; want %v (GrantDelay after the first byte waiting)", r.Deadline(), want)
	}
	if _, ok := r.Grant(t0.Add(2*time.Second), 0); !ok {
		t.Fatal("no grant due at the deadline")
	}
	r.Resume()
	if r.Deadline().IsZero() {
		t.Fatal("Deadline() is zero after Resume")
	}
}

func TestRecvConfigRejectsSlackAboveAnEighthOfTheWindow(t *testing.T) {
	if _, err := NewRecvCredit(RecvConfig{Window: 1000, Slack: 126}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Slack 126 with Window 1000: %v, want ErrInvalidConfig", err)
	}
	if _, err := NewRecvCredit(RecvConfig{Window: 1000, Slack: 125}); err != nil {
		t.Fatalf("Slack 125 with Window 1000: %v", err)
	}
}

// A resume loses grants in flight: the sender must still make progress and
// resend from what the receiver counted.
func TestCreditAcrossResume(t *testing.T) {
	send := NewSendCredit(100, 100)
	recv := mustRecv(t, RecvConfig{Window: 100, MaxWindow: 100, GrantBytes: 10})
	_ = send.Spend(100)
	// 70 bytes arrive on the old connection; 30 are lost with it.
	if _, err := recv.Arrive(70, false, 0, t0); err != nil {
		t.Fatal(err)
	}
	if _, ok := recv.Grant(t0, 0); !ok {
		t.Fatal("grant for 70 credited bytes was not due")
	}
	// The grant is lost with the connection too.
	recv.Resume()
	from, err := send.Resume(recv.Received())
	if err != nil || from != 70 {
		t.Fatalf("sender Resume(%d) = %d, %v; want resend from 70", recv.Received(), from, err)
	}
	g, ok := recv.Grant(t0, 0)
	if !ok || g.Consumed != 70 {
		t.Fatalf("first grant after resume = %+v, %v; want a repeat of consumed 70", g, ok)
	}
	if _, err := send.Apply(g); err != nil {
		t.Fatal(err)
	}
	// The resent 30 bytes were paid for when first sent.
	if _, err := recv.Arrive(30, true, 30, t0); err != nil {
		t.Fatalf("resent bytes overran: %v", err)
	}
	if got := send.Available(); got != 70 {
		t.Errorf("Available() after resume = %d, want 70 (100 window - 30 unconsumed)", got)
	}
	if _, err := send.Apply(Grant{Consumed: 50, Window: 100}); err != nil || send.Available() != 70 {
		t.Errorf("a stale pre-resume grant changed credit: %v, available %d, want 70", err, send.Available())
	}
}

func TestRecvCreditAutoTunesWindowWhenUsedWithinFewRoundTrips(t *testing.T) {
	const rtt = 50 * time.Millisecond
	tests := []struct {
		name   string
		every  time.Duration // between consuming each quarter window
		max    int64
		window int64
	}{
		{"grows when consumed fast", time.Millisecond, 1 << 20, 1 << 20},
		{"stays when consumed slowly", 2 * rtt, 1 << 20, 64 << 10},
		{"capped at MaxWindow", time.Millisecond, 128 << 10, 128 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRecv(t, RecvConfig{Window: 64 << 10, MaxWindow: tt.max})
			now := t0
			for range 200 {
				q := r.Granted().Window / 4
				if _, err := r.Arrive(q, true, q, now); err != nil {
					t.Fatal(err)
				}
				_ = r.Consume(Held{q, q}, now)
				r.Grant(now, rtt)
				now = now.Add(tt.every)
			}
			if got := r.Window(); got != tt.window {
				t.Errorf("Window() = %d, want %d", got, tt.window)
			}
		})
	}
}

func TestRecvConfigValidateNamesTheField(t *testing.T) {
	for _, cfg := range []RecvConfig{
		{Window: -1}, {Window: 100, MaxWindow: 50}, {Window: 100, GrantBytes: 101}, {GrantDelay: -1},
	} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if err := (RecvConfig{}).Validate(); err != nil {
		t.Errorf("zero RecvConfig: %v, want valid (defaults)", err)
	}
}

// A sender and a receiver exchange frames and grants over a channel that
// delays, reorders, duplicates and loses grants, and resumes at random.
// Credit never goes negative nor above the window, and the receiver never
// sees an overrun.
func TestCreditPropertyNeverNegativeNeverAboveWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := rapid.Int64Range(1, 1<<16).Draw(t, "window")
		send := NewSendCredit(window, 4*window)
		recv := mustRecv(t, RecvConfig{Window: window, MaxWindow: 4 * window, GrantBytes: max(1, window/2)})
		var grants []Grant
		var inflight []testFrame
		rd := reader{r: &recv}
		now := t0
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "tick")) * time.Millisecond)
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // send a frame
				if send.Available() == 0 {
					continue
				}
				n := rapid.Int64Range(1, send.Available()).Draw(t, "n")
				if err := send.Spend(n); err != nil {
					t.Fatal(err)
				}
				inflight = append(inflight, testFrame{n, rapid.Bool().Draw(t, "last")})
			case 1: // deliver the oldest frame
				if len(inflight) == 0 {
					continue
				}
				f := inflight[0]
				inflight = inflight[1:]
				if err := rd.arrive(f, now); err != nil {
					t.Fatalf("receiver saw an overrun the sender allowed: %v", err)
				}
			case 2: // the application consumes an envelope
				if err := rd.consume(now); err != nil {
					t.Fatal(err)
				}
			case 3: // the receiver grants
				if g, ok := recv.Grant(now, time.Millisecond); ok {
					grants = append(grants, g)
				}
			case 4: // a grant arrives, possibly out of order or twice
				if len(grants) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(grants)-1).Draw(t, "grant")
				if _, err := send.Apply(grants[i]); err != nil {
					t.Fatalf("valid grant %+v rejected: %v", grants[i], err)
				}
				if rapid.Bool().Draw(t, "forget") {
					grants = append(grants[:i], grants[i+1:]...)
				}
			case 5: // the connection breaks: frames and grants in flight are lost
				inflight, grants = inflight[:0], grants[:0]
				recv.Resume()
				from, err := send.Resume(recv.Received())
				if err != nil {
					t.Fatalf("resume refused: %v", err)
				}
				// Resend what was lost, as frames that are not last.
				for left := send.Sent() - from; left > 0; left = 0 {
					inflight = append(inflight, testFrame{left, false})
				}
			}
			if a := send.Available(); a < 0 || a > send.Window() {
				t.Fatalf("Available() = %d outside [0, window %d]", a, send.Window())
			}
			if send.Window() > 4*window {
				t.Fatalf("window %d grew past MaxWindow %d", send.Window(), 4*window)
			}
		}
	})
}

func TestRecvCreditGrantBytesFollowTheWindow(t *testing.T) {
	tests := []struct {
		window int64
		every  int64
	}{
		{8 << 20, 512 << 10}, // a sixteenth of a large window
		{256 << 10, 32 << 10},
		{32 << 10, 16 << 10}, // at most half a small window
	}
	for _, tt := range tests {
		r := mustRecv(t, RecvConfig{Window: tt.window, MaxWindow: tt.window})
		if _, err := r.Arrive(tt.every-1, false, 0, t0); err != nil {
			t.Fatal(err)
		}
		if g, ok := r.Grant(t0, 0); ok {
			t.Errorf("window %d: grant %+v after %d bytes, want none before %d", tt.window, g, tt.every-1, tt.every)
		}
		_, _ = r.Arrive(1, false, 0, t0)
		if _, ok := r.Grant(t0, 0); !ok {
			t.Errorf("window %d: no grant after %d bytes, want one", tt.window, tt.every)
		}
	}
}

// Whatever the application's pace, a receiver never holds more than two
// windows of complete envelopes it has not consumed plus the envelope
// under way, and the sender never stalls for good: once the application
// consumes, what waited is credited. Envelopes cross one after another, as
// one key's do.
func TestRecvCreditBoundsWhatASlowReaderHolds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := rapid.Int64Range(1<<10, 1<<16).Draw(t, "window")
		maxEnvelope := 4 * window
		send := NewSendCredit(window, window)
		recv := mustRecv(t, RecvConfig{Window: window, MaxWindow: window})
		rd := reader{r: &recv}
		var size, sent int64 // the envelope being sent: its size, bytes sent
		var frames []testFrame
		reads := rapid.Bool().Draw(t, "reads") // the application reads at all
		now := t0
		for range rapid.IntRange(1, 1000).Draw(t, "steps") {
			now = now.Add(time.Millisecond)
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0: // the sender writes a frame of the envelope under way
				if size == 0 {
					size = rapid.Int64Range(1, maxEnvelope).Draw(t, "size")
				}
				n := min(send.Available(), size-sent, rapid.Int64Range(1, window).Draw(t, "frame"))
				if n <= 0 {
					continue
				}
				_ = send.Spend(n)
				sent += n
				frames = append(frames, testFrame{n, sent == size})
				if sent == size {
					size, sent = 0, 0
				}
			case 1: // a frame arrives
				if len(frames) == 0 {
					continue
				}
				f := frames[0]
				frames = frames[1:]
				if err := rd.arrive(f, now); err != nil {
					t.Fatal(err)
				}
			case 2: // the application consumes, if it reads at all
				if !reads {
					continue
				}
				if err := rd.consume(now); err != nil {
					t.Fatal(err)
				}
			case 3: // a grant crosses
				if g, ok := recv.Grant(now, 0); ok {
					if _, err := send.Apply(g); err != nil {
						t.Fatal(err)
					}
				}
			}
			if held := recv.Unread() + rd.envelope; held > 2*window+maxEnvelope {
				t.Fatalf("the receiver holds %d bytes unread (%d of complete envelopes), want at most two windows (%d) and an envelope (%d)",
					held, recv.Unread(), 2*window, maxEnvelope)
			}
		}
		// The application reads everything, and what is on the way
		// arrives: every byte is credited and the sender has its whole
		// window again, so nothing waits for good.
		for _, f := range frames {
			if err := rd.arrive(f, now); err != nil {
				t.Fatal(err)
			}
		}
		for len(rd.held) > 0 {
			if err := rd.consume(now); err != nil {
				t.Fatal(err)
			}
		}
		if recv.Waiting() != 0 || recv.Consumed() != recv.Received() {
			t.Fatalf("after the reader caught up: %d bytes wait, %d of %d received credited", recv.Waiting(), recv.Consumed(), recv.Received())
		}
		if g, ok := recv.Grant(now.Add(time.Second), 0); ok {
			if _, err := send.Apply(g); err != nil {
				t.Fatal(err)
			}
		}
		if send.Available() != window {
			t.Fatalf("sender has %d of credit after the reader caught up, want the whole window %d", send.Available(), window)
		}
	})
}
