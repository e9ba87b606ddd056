package delayproxy

import (
	"math/rand/v2"
	"time"
)

// schedule decides when each chunk of one direction is delivered. It is the
// proxy's whole link model and has no clock of its own: the caller passes
// the time each chunk was read.
type schedule struct {
	link *link      // shared by every connection's same direction
	rng  *rand.Rand // this direction's jitter
	last time.Time  // the previous chunk's delivery time
}

// due returns when n bytes read at now are delivered: after the link has
// carried them at s.Bandwidth, plus s.Delay, plus jitter in [0, s.Jitter),
// and never before the previous chunk. n = 0 (an end of stream) takes no
// link time.
func (sc *schedule) due(now time.Time, n int, s Shape) time.Time {
	at := now
	if n > 0 {
		at = sc.link.reserve(now, n, s.Bandwidth)
	}
	at = at.Add(s.Delay)
	if n > 0 && s.Jitter > 0 {
		at = at.Add(time.Duration(sc.rng.Int64N(int64(s.Jitter))))
	}
	if at.Before(sc.last) {
		at = sc.last // jitter never reorders
	}
	sc.last = at
	return at
}
