package flow

import (
	"slices"
	"testing"
	"time"
)

// holRun sends a large envelope on key 1 of the application stream and,
// while it crosses, a 100-byte envelope on key 2 of stream small every
// millisecond. It
// returns how long each small envelope waited beyond its own time on the
// link: its arrival minus its enqueue, the one-way delay and its
// serialisation.
func holRun(t *testing.T, l link, large int, small StreamID) []time.Duration {
	return holRunWith(t, simConfig(), RecvConfig{}, l, large, small, false)
}

// holRunWith is holRun with the scheduler's and the receiver's settings.
// With pinged set, the estimator has seen the path's delay before the
// large envelope starts, as the session's pings on an idle connection show
// it (the simulation sends no pings; frames alone see the delay plus
// their own time on the link).
func holRunWith(t *testing.T, cfg Config, recv RecvConfig, l link, large int, small StreamID, pinged bool) []time.Duration {
	m := newSim(t, cfg, recv, l.rate, l.rtt)
	if pinged {
		m.s.Estimator().OnRTT(l.rtt, m.now)
	}
	m.enqueue(stApp, 1, large)
	enqueued := map[Handle]time.Time{}
	var waits []time.Duration
	own := time.Duration(float64(100+frameOverhead) / l.rate * float64(time.Second))
	m.onArrive = func(f Frame, at time.Time) {
		if start, ok := enqueued[f.Handle]; ok && f.Last {
			waits = append(waits, at.Sub(start)-m.oneWay-own)
		}
	}
	// Leave startup and drain behind: they build a queue by design.
	m.runUntil(t0.Add(time.Second))
	end := t0.Add(9 * time.Second)
	m.every(time.Millisecond, end, func() { enqueued[m.enqueue(small, 2, 100)] = m.now })
	m.runUntil(end.Add(time.Second))
	if m.s.Pending() == 0 {
		t.Fatal("the large envelope finished before the small ones; the test measures nothing")
	}
	slices.Sort(waits)
	return waits
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1))]
}

// A 100-byte envelope on one key must not wait for a 64 MiB envelope on
// another: about one frame time, the frame the link is busy with.
func TestSmallEnvelopeWaitsAboutOneFrameBehindLargeOne(t *testing.T) {
	l := links[0] // 50 Mbit/s, 20 ms
	waits := holRun(t, l, 64<<20, stApp)
	frame := time.Duration(float64(DefaultMaxFrame+frameOverhead) / l.rate * float64(time.Second))
	p50, p99, worst := quantile(waits, 0.5), quantile(waits, 0.99), waits[len(waits)-1]
	fifo := time.Duration(float64(64<<20) / l.rate * float64(time.Second))
	t.Logf("%d small envelopes: wait p50 %v p99 %v max %v; frame time %v; a FIFO would wait up to %v",
		len(waits), p50, p99, worst, frame, fifo)
	if len(waits) < 7900 {
		t.Errorf("%d small envelopes arrived, want all 8000", len(waits))
	}
	if p99 > 2*frame {
		t.Errorf("p99 wait %v, want at most two frame times (%v)", p99, 2*frame)
	}
	if worst > 4*frame {
		t.Errorf("worst wait %v, want at most four frame times (%v)", worst, 4*frame)
	}
}

// Membership goes ahead of the pace: it waits for at most the frame the link
// is busy with and what the pacer already let onto the link.
func TestMembershipEnvelopeWaitsAboutOneFrameBehindData(t *testing.T) {
	l := links[0]
	waits := holRun(t, l, 64<<20, stMembership)
	frame := time.Duration(float64(DefaultMaxFrame+frameOverhead) / l.rate * float64(time.Second))
	p99, worst := quantile(waits, 0.99), waits[len(waits)-1]
	t.Logf("%d membership envelopes: wait p50 %v p99 %v max %v; frame time %v", len(waits), quantile(waits, 0.5), p99, worst, frame)
	if p99 > 2*frame {
		t.Errorf("p99 wait %v, want at most two frame times (%v)", p99, 2*frame)
	}
}

// On a short path (a LAN: 50 Mbit/s, 100 µs) the congestion window's floor,
// not two bandwidth-delay products, sets what stands in the bottleneck's
// queue, and a small envelope waits behind that much: a large envelope's
// frame is cut to fit the window rather than overrunning it. The
// transport's floor, 16 KiB, is 2.6 ms here. The receiver grants every 4
// KiB, as the transport's does when its reader drains what arrived.
func TestSmallEnvelopeWaitsAtMostTheWindowFloorOnAShortSlowPath(t *testing.T) {
	const floor = 16 << 10
	l := link{"50Mbit/100us", 6.25e6, 100 * time.Microsecond}
	cfg := simConfig()
	cfg.Estimator.MinCwnd = floor
	waits := holRunWith(t, cfg, RecvConfig{GrantBytes: 4 << 10}, l, 64<<20, stApp, true)
	bound := time.Duration(float64(floor+frameOverhead) / l.rate * float64(time.Second))
	p50, p99, worst := quantile(waits, 0.5), quantile(waits, 0.99), waits[len(waits)-1]
	t.Logf("%d small envelopes: wait p50 %v p99 %v max %v; the floor's time on the link %v", len(waits), p50, p99, worst, bound)
	if p99 > bound {
		t.Errorf("p99 wait %v, want at most the window floor's time on the link (%v)", p99, bound)
	}
}
