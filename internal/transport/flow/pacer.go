package flow

import (
	"math"
	"time"
)

// Class is a stream's scheduling class. Classes go out in priority order:
// control, then membership, then data.
type Class uint8

const (
	// ClassData is for application and replication streams: paced, held by
	// the congestion window, small envelopes before frames of large ones.
	ClassData Class = iota
	// ClassControl goes first and bypasses pacing and the congestion window.
	ClassControl
	// ClassMembership goes after control, before data, and bypasses pacing
	// and the congestion window.
	ClassMembership
)

// Bypasses reports whether frames of the class go out ahead of the pace.
func (c Class) Bypasses() bool { return c == ClassControl || c == ClassMembership }

// String returns the class name.
func (c Class) String() string {
	switch c {
	case ClassData:
		return "data"
	case ClassControl:
		return "control"
	case ClassMembership:
		return "membership"
	}
	return "class(?)"
}

// DefaultBurstTime is how much sending time a pacer's bucket holds at least
// (1 ms): a writer woken by a timer every millisecond can still keep a fast
// link busy.
const DefaultBurstTime = time.Millisecond

// Pacer is a token bucket refilled at the pacing rate. A send of n bytes may
// go when the bucket holds min(n, burst) tokens; sending takes n tokens, and
// the bucket may go into debt for a frame larger than the burst, so the long
// run rate is exact. The burst is the larger of a byte floor and the rate
// times a burst time, so pacing at gigabit rates does not need microsecond
// timers. Bytes of bypass classes never wait but are still charged, so the
// total stays at the pace.
//
// The zero value does not pace (rate 0 means unlimited). It is not safe for
// concurrent use; the session serialises calls.
type Pacer struct {
	rate      float64 // bytes per second; 0 means unpaced
	minBurst  float64 // bytes
	burstTime time.Duration
	burst     float64 // bytes: max(minBurst, rate × burstTime)
	tokens    float64 // bytes; negative is debt
	last      time.Time
}

// NewPacer returns a pacer whose bucket holds at least minBurst bytes and at
// least burstTime of sending at the rate (0 means [DefaultBurstTime]),
// unpaced until [Pacer.SetRate].
func NewPacer(minBurst int64, burstTime time.Duration) Pacer {
	if burstTime <= 0 {
		burstTime = DefaultBurstTime
	}
	b := float64(max(minBurst, 1))
	return Pacer{minBurst: b, burstTime: burstTime, burst: b, tokens: b}
}

// SetRate sets the pacing rate in bytes per second from now on; 0 or less
// turns pacing off.
func (p *Pacer) SetRate(bytesPerSecond float64, now time.Time) {
	p.refill(now)
	p.rate = max(bytesPerSecond, 0)
	p.burst = max(p.minBurst, p.rate*p.burstTime.Seconds())
}

// Burst returns the bucket size in bytes.
func (p *Pacer) Burst() float64 { return p.burst }

// Rate returns the pacing rate in bytes per second (0 means unpaced).
func (p *Pacer) Rate() float64 { return p.rate }

// Delay returns how long a send of n bytes of class c must wait from now.
// Bypass classes never wait.
func (p *Pacer) Delay(c Class, n int, now time.Time) time.Duration {
	if c.Bypasses() || p.rate == 0 {
		return 0
	}
	p.refill(now)
	need := min(float64(n), p.burst)
	if p.tokens >= need-1e-6 { // float rounding must not cost an extra wake-up
		return 0
	}
	return time.Duration(math.Ceil((need - p.tokens) / p.rate * float64(time.Second)))
}

// Spend takes n bytes' worth of tokens for a send happening now.
func (p *Pacer) Spend(n int, now time.Time) {
	p.refill(now)
	p.tokens -= float64(n)
}

// Reset fills the bucket, as after an idle connection or a resume.
func (p *Pacer) Reset(now time.Time) {
	p.tokens, p.last = p.burst, now
}

func (p *Pacer) refill(now time.Time) {
	if p.rate == 0 { // unpaced: the bucket stays full
		p.tokens, p.last = p.burst, now
		return
	}
	if !now.After(p.last) { // the same instant again, or a clock step back
		return
	}
	p.tokens = min(p.burst, p.tokens+p.rate*now.Sub(p.last).Seconds())
	p.last = now
}
