package flow

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func mustEstimator(t fataler, cfg EstimatorConfig) *Estimator {
	t.Helper()
	e, err := NewEstimator(cfg)
	if err != nil {
		t.Fatalf("NewEstimator: %v", err)
	}
	return e
}

// feed sends n frames of size bytes on stream 1, one every gap, each
// credited rtt after it was sent, and returns the time after the last credit.
func feed(e *Estimator, now time.Time, n, size int, gap, rtt time.Duration, appLimited bool) time.Time {
	st := e.stream(1)
	off := st.acked
	for _, r := range e.streams {
		if r.id == 1 && r.records.n > 0 {
			off = r.records.buf[(r.records.head+r.records.n-1)%len(r.records.buf)].end
		}
	}
	type pending struct {
		at  time.Time
		end int64
	}
	var q []pending
	for i := range n {
		at := now.Add(time.Duration(i) * gap)
		for len(q) > 0 && !q[0].at.After(at) {
			e.OnCredit(1, q[0].end, q[0].at)
			q = q[1:]
		}
		if appLimited {
			e.SetAppLimited()
		}
		off += int64(size)
		e.OnSend(1, off, size, at)
		q = append(q, pending{at.Add(rtt), off})
	}
	for _, p := range q {
		e.OnCredit(1, p.end, p.at)
		now = p.at
	}
	return now
}

func within(got, want, tolerance float64) bool {
	return math.Abs(got-want) <= tolerance*want
}

func TestEstimatorMeasuresDeliveryRateAndRTT(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	// 10 KB every millisecond is 10 MB/s; credit returns 20 ms later.
	feed(e, t0, 2000, 10_000, time.Millisecond, 20*time.Millisecond, false)
	if !within(e.Bandwidth(), 10e6, 0.05) {
		t.Errorf("Bandwidth() = %.0f B/s, want 10e6 ±5%%", e.Bandwidth())
	}
	if e.MinRTT() != 20*time.Millisecond {
		t.Errorf("MinRTT() = %v, want 20ms", e.MinRTT())
	}
	if e.Mode() != ModeProbeBandwidth {
		t.Errorf("Mode() = %v after 2 s of steady delivery, want probe-bandwidth", e.Mode())
	}
}

func TestEstimatorAppLimitedSamplesNeverLowerBandwidth(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	now := feed(e, t0, 2000, 10_000, time.Millisecond, 20*time.Millisecond, false)
	before := e.Bandwidth()
	// A hundred times slower, for far longer than the filter window.
	feed(e, now.Add(time.Second), 500, 1_000, 10*time.Millisecond, 20*time.Millisecond, true)
	if e.Bandwidth() < before {
		t.Errorf("Bandwidth() fell from %.0f to %.0f on app-limited samples; want it kept", before, e.Bandwidth())
	}
}

func TestEstimatorNonAppLimitedSamplesLowerBandwidthAfterFilterWindow(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	now := feed(e, t0, 2000, 10_000, time.Millisecond, 20*time.Millisecond, false)
	feed(e, now, 3000, 5_000, time.Millisecond, 20*time.Millisecond, false)
	if !within(e.Bandwidth(), 5e6, 0.05) {
		t.Errorf("Bandwidth() = %.0f after 3 s at 5 MB/s, want 5e6 ±5%%", e.Bandwidth())
	}
}

func TestEstimatorIgnoresStaleCredit(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	e.OnSend(1, 100, 100, t0)
	e.OnSend(1, 200, 100, t0)
	if _, ok := e.OnCredit(1, 200, t0.Add(time.Millisecond)); !ok {
		t.Fatal("credit for two frames gave no sample")
	}
	if _, ok := e.OnCredit(1, 100, t0.Add(2*time.Millisecond)); ok {
		t.Error("a stale credit count gave a sample; want it ignored")
	}
	if e.Inflight() != 0 || e.Delivered() != 200 {
		t.Errorf("inflight %d delivered %d, want 0 and 200", e.Inflight(), e.Delivered())
	}
}

func TestEstimatorPartialCreditKeepsRestOfFrameInFlight(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	e.OnSend(1, 100, 100, t0)
	e.OnCredit(1, 40, t0.Add(time.Millisecond))
	if e.Inflight() != 60 {
		t.Errorf("Inflight() = %d after 40 of 100 bytes were credited, want 60", e.Inflight())
	}
}

func TestEstimatorPingRTTFeedsMinRTT(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	e.OnRTT(7*time.Millisecond, t0)
	e.OnRTT(9*time.Millisecond, t0.Add(time.Second))
	if e.MinRTT() != 7*time.Millisecond {
		t.Errorf("MinRTT() = %v, want 7ms", e.MinRTT())
	}
	e.OnRTT(9*time.Millisecond, t0.Add(11*time.Second))
	if e.MinRTT() != 9*time.Millisecond {
		t.Errorf("MinRTT() = %v 11 s after the 7ms sample, want 9ms: the filter window is 10 s", e.MinRTT())
	}
}

func TestEstimatorResumeForgetsInFlightAndKeepsMeasures(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	now := feed(e, t0, 2000, 10_000, time.Millisecond, 20*time.Millisecond, false)
	bw, rtt := e.Bandwidth(), e.MinRTT()
	e.OnSend(1, e.stream(1).acked+50_000, 50_000, now)
	e.Resume()
	if e.Inflight() != 0 || e.Bandwidth() != bw || e.MinRTT() != rtt {
		t.Errorf("after Resume: inflight %d bw %.0f rtt %v; want 0, %.0f, %v", e.Inflight(), e.Bandwidth(), e.MinRTT(), bw, rtt)
	}
}

func TestEstimatorCwndHasFloor(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{MinCwnd: 64 << 10})
	feed(e, t0, 200, 100, 10*time.Millisecond, time.Millisecond, false)
	if e.CWnd() < 64<<10 {
		t.Errorf("CWnd() = %d on a tiny BDP, want at least the 64 KiB floor", e.CWnd())
	}
}

func TestWindowedMaxForgetsOldMaximum(t *testing.T) {
	var f windowedMax
	f.update(10, 0, 100)
	for tick := int64(1); tick <= 10; tick++ {
		if got := f.update(10, tick, 50); got != 100 {
			t.Fatalf("max at %d = %v, want 100 while the sample is in the window", tick, got)
		}
	}
	var got float64
	for tick := int64(11); tick <= 14; tick++ {
		got = f.update(10, tick, 50)
	}
	if got != 50 {
		t.Errorf("max = %v after the window passed, want 50", got)
	}
}

func TestEstimatorConfigValidateNamesTheField(t *testing.T) {
	for _, cfg := range []EstimatorConfig{
		{MinCwnd: -1}, {MinCwnd: 100, InitialCwnd: 50}, {InitialRTT: -1}, {BandwidthRounds: -1}, {MinRTTWindow: -1},
		{ProbeGain: 0.9}, {ProbeGain: 2},
	} {
		if _, err := NewEstimator(cfg); err == nil {
			t.Errorf("NewEstimator(%+v) accepted it, want ErrInvalidConfig", cfg)
		}
	}
}

// simResult summarises a run of the simulated link.
type simResult struct {
	bw       float64
	rtt      time.Duration
	goodput  float64 // payload bytes per second written in the measured span
	inflight float64 // mean in-flight bytes in the measured span
	maxInfl  int64
}

// runBulk drives a bulk transfer over a link of rate bytes/s and round trip
// rtt for dur, measuring over the second half.
func runBulk(t *testing.T, m *sim, dur time.Duration) simResult {
	end := t0.Add(dur)
	m.keepBacklogged(stApp, 4<<20, end)
	var res simResult
	var samples int
	half := t0.Add(dur / 2)
	m.runUntil(half)
	startWritten := m.written
	m.every(time.Millisecond, end, func() {
		in := m.s.Estimator().Inflight()
		res.inflight += float64(in)
		res.maxInfl = max(res.maxInfl, in)
		samples++
	})
	m.runUntil(end)
	res.inflight /= float64(samples)
	res.goodput = float64(m.written-startWritten) / (dur / 2).Seconds()
	res.bw, res.rtt = m.s.Estimator().Bandwidth(), m.s.Estimator().MinRTT()
	return res
}

type link struct {
	name string
	rate float64
	rtt  time.Duration
}

var links = []link{
	{"50Mbit/20ms", 6.25e6, 20 * time.Millisecond},
	{"100Mbit/50ms", 12.5e6, 50 * time.Millisecond},
	{"10Mbit/10ms", 1.25e6, 10 * time.Millisecond},
	{"400Mbit/2ms", 50e6, 2 * time.Millisecond},
}

// pipe is what a link holds: the rate times the round trip of a full frame.
func (l link) pipe() (time.Duration, float64) {
	rtt := l.rtt + time.Duration(float64(DefaultMaxFrame+frameOverhead)/l.rate*float64(time.Second))
	return rtt, l.rate * rtt.Seconds()
}

// Each link is simulated once; the subtests are the behaviours checked on
// that run.
func TestEstimatorOnSimulatedLink(t *testing.T) {
	for _, l := range links {
		t.Run(l.name, func(t *testing.T) {
			m := newSim(t, simConfig(), RecvConfig{}, l.rate, l.rtt)
			res := runBulk(t, m, 10*time.Second)
			rtt, bdp := l.pipe()
			t.Logf("bw %.3g (link %.3g) rtt %v (link %v) goodput %.3g window %d; inflight mean %.0f max %d (BDP %.0f)",
				res.bw, l.rate, res.rtt, rtt, res.goodput, m.recv[stApp].Window(), res.inflight, res.maxInfl, bdp)
			t.Run("bandwidth estimate converges to the link rate", func(t *testing.T) {
				if !within(res.bw, l.rate, 0.1) {
					t.Errorf("bandwidth estimate %.3g, want link rate %.3g ±10%%", res.bw, l.rate)
				}
			})
			t.Run("min RTT converges to the path delay", func(t *testing.T) {
				if !within(float64(res.rtt), float64(rtt), 0.1) {
					t.Errorf("min RTT %v, want path and one frame time %v ±10%%", res.rtt, rtt)
				}
			})
			t.Run("goodput fills the link", func(t *testing.T) {
				if !within(res.goodput, l.rate, 0.1) {
					t.Errorf("goodput %.3g, want link rate %.3g ±10%%", res.goodput, l.rate)
				}
			})
			t.Run("in flight stays under two BDP", func(t *testing.T) {
				limit := max(2*bdp, float64(m.s.Estimator().cfg.MinCwnd)) + 2*DefaultMaxFrame
				if float64(res.maxInfl) > limit {
					t.Errorf("in flight peaked at %d bytes, want at most 2 BDP (or the cwnd floor) + 2 frames = %.0f", res.maxInfl, limit)
				}
			})
		})
	}
}

// A bulk transfer teaches the estimator the link; then the application
// sends a trickle for far longer than the filter window. The trickle's
// samples are app-limited and must not lower the estimate.
func TestEstimatorHoldsBandwidthWhileAppLimited(t *testing.T) {
	l := links[0]
	m := newSim(t, simConfig(), RecvConfig{}, l.rate, l.rtt)
	m.keepBacklogged(stApp, 64<<10, t0.Add(5*time.Second))
	m.runUntil(t0.Add(6 * time.Second))
	learned := m.s.Estimator().Bandwidth()
	m.every(10*time.Millisecond, t0.Add(30*time.Second), func() { m.enqueue(stApp, 1, 1000) })
	lowest := learned
	m.every(time.Millisecond, t0.Add(30*time.Second), func() { lowest = min(lowest, m.s.Estimator().Bandwidth()) })
	m.runUntil(t0.Add(30 * time.Second))
	if !within(learned, l.rate, 0.1) {
		t.Fatalf("learned %.3g, want the link rate %.3g first", learned, l.rate)
	}
	if lowest < learned {
		t.Errorf("estimate fell from %.3g to %.3g while the application sent 100 KB/s; want it held", learned, lowest)
	}
}

// The same when the receiving application, not the sender's, is slow: grants
// acknowledge what was received, so the estimator still measures the link,
// and the sender, held by credit, marks its samples credit-limited.
func TestEstimatorHoldsBandwidthWhileCreditLimited(t *testing.T) {
	l := links[0]
	m := newSim(t, simConfig(), RecvConfig{}, l.rate, l.rtt)
	// Envelopes of one frame: all their bytes wait for the consumer.
	m.keepBacklogged(stApp, 8<<10, t0.Add(30*time.Second))
	m.runUntil(t0.Add(5 * time.Second))
	learned := m.s.Estimator().Bandwidth()
	m.consumeRate = l.rate / 4
	lowest := learned
	m.every(time.Millisecond, t0.Add(30*time.Second), func() { lowest = min(lowest, m.s.Estimator().Bandwidth()) })
	m.runUntil(t0.Add(30 * time.Second))
	if !within(learned, l.rate, 0.1) {
		t.Fatalf("learned %.3g, want the link rate %.3g first", learned, l.rate)
	}
	if lowest < learned {
		t.Errorf("estimate fell from %.3g to %.3g while the receiver consumed at a quarter of the link; want it held", learned, lowest)
	}
}

func TestEstimatorFollowsRateDrop(t *testing.T) {
	l := links[0]
	m := newSim(t, simConfig(), RecvConfig{}, l.rate, l.rtt)
	m.keepBacklogged(stApp, 64<<10, t0.Add(20*time.Second))
	m.runUntil(t0.Add(5 * time.Second))
	m.rate = l.rate / 2
	// Ten round trips per filter window; a few windows, with the queue the
	// drop builds, are well under 2 s.
	m.runUntil(t0.Add(7 * time.Second))
	if got := m.s.Estimator().Bandwidth(); !within(got, l.rate/2, 0.15) {
		t.Errorf("2 s after the link halved to %.3g the estimate is %.3g, want ±15%%", l.rate/2, got)
	}
	m.runUntil(t0.Add(20 * time.Second))
	if got := m.s.Estimator().MinRTT(); got > 2*l.rtt {
		t.Errorf("min RTT %v after the drop, want the queue drained (about %v)", got, l.rtt)
	}
}

func TestEstimatorFindsRateIncrease(t *testing.T) {
	l := links[0]
	m := newSim(t, simConfig(), RecvConfig{}, l.rate, l.rtt)
	m.keepBacklogged(stApp, 64<<10, t0.Add(20*time.Second))
	m.runUntil(t0.Add(5 * time.Second))
	m.rate = 2 * l.rate
	m.runUntil(t0.Add(8 * time.Second))
	if got := m.s.Estimator().Bandwidth(); !within(got, 2*l.rate, 0.15) {
		t.Errorf("3 s after the link doubled to %.3g the estimate is %.3g, want ±15%%", 2*l.rate, got)
	}
}

// Random sends, credits (in order, stale, partial), app-limited marks, pings
// and resumes on two streams: in-flight is exactly what was sent and not
// credited, the window never drops below its floor, pacing stays positive,
// and an app-limited sample never lowers the bandwidth estimate.
func TestEstimatorProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := mustEstimator(t, EstimatorConfig{})
		now := t0
		type stream struct{ sent, credited int64 }
		streams := map[StreamID]*stream{1: {}, 2: {}}
		var inflight int64
		for range rapid.IntRange(1, 400).Draw(t, "ops") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(5*time.Millisecond)).Draw(t, "tick")))
			id := StreamID(rapid.IntRange(1, 2).Draw(t, "stream"))
			st := streams[id]
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1:
				n := rapid.IntRange(1, 64<<10).Draw(t, "n")
				st.sent += int64(n)
				inflight += int64(n)
				e.OnSend(id, st.sent, n, now)
			case 2, 3:
				consumed := rapid.Int64Range(0, st.sent).Draw(t, "consumed")
				before := e.Bandwidth()
				s, ok := e.OnCredit(id, consumed, now)
				if consumed > st.credited {
					inflight -= consumed - st.credited
					st.credited = consumed
				}
				if ok && s.AppLimited && e.Bandwidth() < before {
					t.Fatalf("app-limited sample %+v lowered the estimate from %.0f to %.0f", s, before, e.Bandwidth())
				}
			case 4:
				e.SetAppLimited()
			case 5:
				if rapid.Bool().Draw(t, "resume") {
					e.Resume()
					inflight = 0
					// The session resends what was not credited.
					for sid, s := range streams {
						if s.sent > s.credited {
							e.OnSend(sid, s.sent, int(s.sent-s.credited), now)
							inflight += s.sent - s.credited
						}
					}
				} else {
					e.OnRTT(time.Duration(rapid.Int64Range(1, int64(time.Second)).Draw(t, "rtt")), now)
				}
			}
			if e.Inflight() != inflight {
				t.Fatalf("Inflight() = %d, want %d sent and not credited", e.Inflight(), inflight)
			}
			if e.CWnd() < e.cfg.MinCwnd {
				t.Fatalf("CWnd() = %d below the floor %d", e.CWnd(), e.cfg.MinCwnd)
			}
			if !(e.PacingRate() > 0) {
				t.Fatalf("PacingRate() = %v, want positive", e.PacingRate())
			}
		}
	})
}

// Without a new minimum for MinRTTWindow, the estimator drains to MinCwnd,
// holds it about 200 ms and a round trip, takes the delay it then sees as the
// path's, and resumes with its window.
func TestEstimatorProbesRTTWhenMinimumIsStale(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	now := feed(e, t0, 2000, 10_000, time.Millisecond, 20*time.Millisecond, false)
	cwnd := e.CWnd()
	// The path's delay rises to 30 ms for longer than the filter window.
	now = feed(e, now, 11_000, 10_000, time.Millisecond, 30*time.Millisecond, false)
	if e.Mode() != ModeProbeRTT {
		t.Fatalf("mode %v after 11 s without a new minimum, want probe-rtt", e.Mode())
	}
	// The sender obeys the floor: one frame in flight at a time.
	for i := 0; e.Mode() == ModeProbeRTT; i++ {
		if i > 100 {
			t.Fatal("ProbeRTT did not end within 100 round trips")
		}
		now = feed(e, now.Add(time.Millisecond), 1, 10_000, time.Millisecond, 30*time.Millisecond, false)
	}
	if e.MinRTT() != 30*time.Millisecond {
		t.Errorf("MinRTT() = %v after 11 s at 30 ms, want 30ms", e.MinRTT())
	}
	if e.Mode() != ModeProbeBandwidth || e.CWnd() < cwnd {
		t.Errorf("after ProbeRTT: mode %v cwnd %d; want probe-bandwidth with the window restored (>= %d)", e.Mode(), e.CWnd(), cwnd)
	}
}

func TestEstimatorProbeRTTHoldsInflightAtFloor(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	now := feed(e, t0, 2000, 10_000, time.Millisecond, 20*time.Millisecond, false)
	e.OnRTT(25*time.Millisecond, now.Add(11*time.Second))
	e.OnSend(1, e.stream(1).acked+1000, 1000, now.Add(11*time.Second))
	e.OnCredit(1, e.stream(1).acked+1000, now.Add(11*time.Second+25*time.Millisecond))
	if e.Mode() != ModeProbeRTT || e.CWnd() != e.cfg.MinCwnd {
		t.Errorf("11 s after the last minimum: mode %v cwnd %d; want probe-rtt with cwnd at the %d floor", e.Mode(), e.CWnd(), e.cfg.MinCwnd)
	}
}

// A writer whose pacing timer fires only every millisecond still fills a
// 10 Gbit/s link: the pacer's bucket holds a millisecond of sending.
func TestFastLinkWithCoarseTimer(t *testing.T) {
	const rate = 1.25e9
	m := newSim(t, simConfig(), RecvConfig{MaxWindow: 64 << 20}, rate, time.Millisecond)
	m.timerGranularity = time.Millisecond
	res := runBulk(t, m, 2*time.Second)
	t.Logf("goodput %.3g of %.3g B/s, bw estimate %.3g, min RTT %v", res.goodput, rate, res.bw, res.rtt)
	if !within(res.goodput, rate, 0.1) {
		t.Errorf("goodput %.3g, want the link rate %.3g ±10%% despite a 1 ms timer", res.goodput, rate)
	}
}

// On a path whose delay is far shorter than the interval between grants
// (loopback: tens of microseconds against a grant per 256 KiB here), credit
// returns in bursts. A window of two BDPs from the min RTT would idle the
// sender between bursts; the ack-aggregation term keeps room for a burst.
func TestEstimatorWindowCoversCreditReturningInBursts(t *testing.T) {
	const rate = 1e9
	rtt := 40 * time.Microsecond
	m := newSim(t, simConfig(), RecvConfig{Window: 8 << 20, GrantBytes: 256 << 10}, rate, rtt)
	res := runBulk(t, m, 200*time.Millisecond)
	t.Logf("bw %.3g rtt %v goodput %.3g cwnd %d aggregation %d", res.bw, res.rtt, res.goodput,
		m.s.Estimator().CWnd(), m.s.Estimator().aggregationCwnd())
	if res.goodput < 0.8*rate {
		t.Errorf("goodput %.3g, want at least 80%% of the link rate %.3g", res.goodput, rate)
	}
}

// The room kept for bursts of credit is capped at the grant delay's worth
// of sending at the sustained rate: any more would stand in a slow
// bottleneck's queue.
func TestEstimatorAggregationRoomIsCappedByGrantDelay(t *testing.T) {
	l := links[0]
	m := newSim(t, simConfig(), RecvConfig{GrantBytes: 256 << 10}, l.rate, l.rtt)
	runBulk(t, m, 5*time.Second)
	e := m.s.Estimator()
	if got, limit := e.aggregationCwnd(), int64(e.SustainedRate()*DefaultGrantDelay.Seconds())+1; got > limit {
		t.Errorf("aggregation room %d bytes, want at most the grant delay's worth %d", got, limit)
	}
}

// The sustained rate counts whole spans of at least 20 ms: a burst shorter
// than that leaves it unset, however fast; a steady flow sets it to its
// rate.
func TestEstimatorSustainedRateIgnoresShortBursts(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	now := feed(e, t0, 200, 16<<10, 16*time.Microsecond, 50*time.Microsecond, false)
	if r := e.SustainedRate(); r != 0 {
		t.Fatalf("sustained rate %.3g after a 3 ms burst, want none yet", r)
	}
	if e.Bandwidth() < 5e8 {
		t.Fatalf("bandwidth estimate %.3g: the burst should have raised it", e.Bandwidth())
	}
	// 1 MB/s for a second: 16 KiB every 16.384 ms.
	feed(e, now.Add(time.Second), 60, 16<<10, 16384*time.Microsecond, time.Millisecond, false)
	if r := e.SustainedRate(); !within(r, 1e6, 0.1) {
		t.Fatalf("sustained rate %.3g after a second at 1 MB/s, want about 1e6", r)
	}
}

// A span in which the sender idled or waited for credit may raise the
// sustained rate but not lower it; a span in which the path was the limit
// lowers it.
func TestEstimatorSustainedRateIsNotLoweredWhileAppLimited(t *testing.T) {
	e := mustEstimator(t, EstimatorConfig{})
	// 1 GB/s for 100 ms: 16 KiB every 16.384 µs.
	now := feed(e, t0, 6000, 16<<10, 16384*time.Nanosecond, 50*time.Microsecond, false)
	fast := e.SustainedRate()
	if !within(fast, 1e9, 0.1) {
		t.Fatalf("sustained rate %.3g after 100 ms at 1 GB/s, want about 1e9", fast)
	}
	// Idle for 50 ms, then 1 MB/s from an application with little to send.
	now = feed(e, now.Add(50*time.Millisecond), 10, 16<<10, 16384*time.Microsecond, time.Millisecond, true)
	if r := e.SustainedRate(); r != fast {
		t.Fatalf("sustained rate %.3g after app-limited spans, want it kept at %.3g", r, fast)
	}
	// The path itself slows to 1 MB/s.
	feed(e, now, 10, 16<<10, 16384*time.Microsecond, time.Millisecond, false)
	if r := e.SustainedRate(); !within(r, 1e6, 0.1) {
		t.Fatalf("sustained rate %.3g after path-limited spans at 1 MB/s, want about 1e6", r)
	}
}
