package flow

import (
	"fmt"
	"time"
)

// BBR constants (Cardwell et al., "BBR: Congestion-Based Congestion
// Control", and draft-cardwell-iccrg-bbr-congestion-control).
const (
	// startupGain is 2/ln 2: the smallest gain that doubles the delivery
	// rate every round trip.
	startupGain = 2.885
	drainGain   = 1 / startupGain
	// cwndGain keeps about two bandwidth-delay products in flight, so
	// batched credit returns do not starve the pipe.
	cwndGain = 2.0
	// fullBandwidthGrowth and fullBandwidthRounds: startup ends when the
	// bandwidth estimate grew less than 25% over three rounds.
	fullBandwidthGrowth = 1.25
	fullBandwidthRounds = 3
	// extraAckedRounds is the length of the ack-aggregation max filter in
	// round trips (as Linux BBR). extraAckedMaxTime caps the extra window
	// it adds at the time credit may wait at the receiver (Linux caps it at
	// 100 ms): any more would stand in the bottleneck queue, where small
	// envelopes wait behind it.
	extraAckedRounds  = 5
	extraAckedMaxTime = DefaultGrantDelay
	// sustainedWindow is the span over which the sustained delivery rate
	// is measured: long enough that a token bucket's burst (tc tbf lets
	// its bucket through at line rate after an idle spell) or a burst of
	// credit cannot pass for the path's rate.
	sustainedWindow = 20 * time.Millisecond
)

// probePhases is the length of the steady-state gain cycle.
const probePhases = 8

// DefaultProbeGain is the default pacing gain of the steady state's probing
// phase. BBR uses 1.25; the queue such a probe builds (a quarter of a BDP,
// 5.6 ms at 50 Mbit/s and 20 ms) is what a small envelope then waits behind,
// so Troupe probes more gently and finds a higher rate a little later.
const DefaultProbeGain = 1.1

// probeGain returns the pacing gain of a phase of the steady-state cycle, one
// phase per min RTT: probe for more bandwidth, drain the queue the probe
// made, cruise.
func (e *Estimator) probeGain(phase int) float64 {
	switch phase {
	case 0:
		return e.cfg.ProbeGain
	case 1:
		return 2 - e.cfg.ProbeGain
	}
	return 1
}

// Mode is the estimator's phase.
type Mode uint8

const (
	// ModeStartup grows the sending rate by startupGain per round trip until
	// the delivery rate stops growing.
	ModeStartup Mode = iota
	// ModeDrain paces below the estimate until the queue startup built is
	// gone.
	ModeDrain
	// ModeProbeBandwidth paces at the estimate with a small probing cycle.
	ModeProbeBandwidth
	// ModeProbeRTT holds in-flight at MinCwnd for about 200 ms and a round
	// trip when the min RTT was not refreshed for MinRTTWindow, so the path's
	// queue drains and the true delay is seen again.
	ModeProbeRTT
)

// probeRTTDuration is how long ProbeRTT holds in-flight down once it got
// there.
const probeRTTDuration = 200 * time.Millisecond

// String returns the mode name.
func (m Mode) String() string {
	switch m {
	case ModeStartup:
		return "startup"
	case ModeDrain:
		return "drain"
	case ModeProbeBandwidth:
		return "probe-bandwidth"
	case ModeProbeRTT:
		return "probe-rtt"
	}
	return "mode(?)"
}

// EstimatorConfig configures an [Estimator]. The zero value means the
// defaults.
type EstimatorConfig struct {
	// MinCwnd is the congestion window floor in bytes, at least the peer's
	// [RecvConfig.GrantBytes]. Default 64 KiB (four 16 KiB frames).
	MinCwnd int64
	// InitialCwnd is the congestion window in bytes before the first
	// measurement. Default 2 × MinCwnd.
	InitialCwnd int64
	// InitialRTT is the round trip assumed before the first sample; it sets
	// the first pacing rate (startup gain × InitialCwnd / InitialRTT).
	// Default 10 ms.
	InitialRTT time.Duration
	// BandwidthRounds is the length of the delivery-rate max filter in round
	// trips. Default 10.
	BandwidthRounds int
	// MinRTTWindow is the length of the min-RTT filter. Default 10 s.
	MinRTTWindow time.Duration
	// ProbeGain is the pacing gain, above 1 and at most 1.5, with which the
	// steady state probes for more bandwidth one round trip in eight; the
	// next round trip drains at 2 - ProbeGain. Default [DefaultProbeGain].
	ProbeGain float64
}

func (c EstimatorConfig) withDefaults() EstimatorConfig {
	if c.MinCwnd == 0 {
		c.MinCwnd = 64 << 10
	}
	if c.InitialCwnd == 0 {
		c.InitialCwnd = 2 * c.MinCwnd
	}
	if c.InitialRTT == 0 {
		c.InitialRTT = 10 * time.Millisecond
	}
	if c.BandwidthRounds == 0 {
		c.BandwidthRounds = 10
	}
	if c.MinRTTWindow == 0 {
		c.MinRTTWindow = 10 * time.Second
	}
	if c.ProbeGain == 0 {
		c.ProbeGain = DefaultProbeGain
	}
	return c
}

// Validate reports the first field that makes no sense, wrapping
// [ErrInvalidConfig]. Zero fields are valid: they mean the default.
func (c EstimatorConfig) Validate() error {
	switch d := c.withDefaults(); {
	case c.MinCwnd < 0:
		return fmt.Errorf("%w: EstimatorConfig.MinCwnd %d is negative", ErrInvalidConfig, c.MinCwnd)
	case d.InitialCwnd < d.MinCwnd:
		return fmt.Errorf("%w: EstimatorConfig.InitialCwnd %d is below MinCwnd %d", ErrInvalidConfig, c.InitialCwnd, d.MinCwnd)
	case c.InitialRTT < 0:
		return fmt.Errorf("%w: EstimatorConfig.InitialRTT %v is negative", ErrInvalidConfig, c.InitialRTT)
	case c.BandwidthRounds < 0:
		return fmt.Errorf("%w: EstimatorConfig.BandwidthRounds %d is negative", ErrInvalidConfig, c.BandwidthRounds)
	case c.MinRTTWindow < 0:
		return fmt.Errorf("%w: EstimatorConfig.MinRTTWindow %v is negative", ErrInvalidConfig, c.MinRTTWindow)
	case d.ProbeGain <= 1 || d.ProbeGain > 1.5:
		return fmt.Errorf("%w: EstimatorConfig.ProbeGain %v is outside (1, 1.5]", ErrInvalidConfig, c.ProbeGain)
	}
	return nil
}

// RateSample is one delivery-rate measurement, taken when credit returns.
type RateSample struct {
	// Delivered is the number of bytes delivered over Interval.
	Delivered int64
	// Interval is the longer of the send and the credit-return intervals of
	// the measured bytes.
	Interval time.Duration
	// RTT is the time from sending the newest credited frame to its credit
	// returning; it includes the receiver's consumption and grant delay.
	RTT time.Duration
	// Rate is Delivered/Interval in bytes per second.
	Rate float64
	// AppLimited says the measured frame was sent while the sender had
	// nothing more to send or no credit: such a sample may raise the
	// bandwidth estimate but never lowers it.
	AppLimited bool
}

// sendRecord is what the estimator remembers of one sent frame. Times are
// nanoseconds since the estimator's base time.
type sendRecord struct {
	start, end    int64 // stream byte offsets [start, end)
	sent          int64 // when it was sent
	delivered     int64 // delivered count when it was sent
	deliveredTime int64 // when that count was last raised
	firstSent     int64 // send time of the frame that opened the interval
	appLimited    bool
}

// recordRing is a growable FIFO of send records; it reuses its storage.
type recordRing struct {
	buf  []sendRecord
	head int
	n    int
}

func (r *recordRing) push(rec sendRecord) {
	if r.n == len(r.buf) {
		buf := make([]sendRecord, max(16, 2*len(r.buf)))
		for i := range r.n {
			buf[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = rec
	r.n++
}

func (r *recordRing) front() *sendRecord { return &r.buf[r.head] }

func (r *recordRing) pop() {
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

type estStream struct {
	id      StreamID
	acked   int64 // highest acknowledged count seen
	records recordRing
}

// Estimator measures the path from returning credit as BBR does and derives
// the pacing rate and congestion window. Each sent frame is recorded under
// its stream byte offset with its send time, the bytes delivered so far and
// whether the sender was app- or credit-limited; a grant that moves a
// stream's received count acknowledges the frames below it and yields a
// delivery-rate sample. The bandwidth estimate is the maximum sample over
// BandwidthRounds round trips; the path delay is the minimum RTT over
// MinRTTWindow (ping RTTs count too).
//
// Keep one Estimator per peer across connections: its measures survive a
// resume (call [Estimator.Resume]). It is not safe for concurrent use; the
// session serialises calls. All times are passed in.
type Estimator struct {
	cfg     EstimatorConfig
	base    time.Time
	streams []estStream

	delivered     int64
	deliveredTime int64
	firstSent     int64
	inflight      int64
	// appLimitedUntil is non-zero while sends are app-limited: until the
	// delivered count passes it.
	appLimitedUntil int64

	round              int64
	nextRoundDelivered int64

	bw windowedMax // bytes/s over rounds
	// minRTT is the path delay in nanoseconds (0 before the first sample);
	// minRTTStamp is when it was last set or confirmed. rttExpired says the
	// last sample found it older than MinRTTWindow.
	minRTT      int64
	minRTTStamp int64
	rttExpired  bool

	priorCwnd         int64
	probeRTTDone      int64 // when ProbeRTT may end; 0 until in-flight is down
	probeRTTRoundDone bool

	mode        Mode
	filledPipe  bool
	fullBw      float64
	fullBwCount int
	cycleIndex  int
	cycleStamp  int64

	// Ack aggregation (Linux BBR's extra_acked): credit that returns in
	// bursts (a grant per 32 KiB, a receiver that is scheduled late)
	// acknowledges more in an epoch than the bandwidth estimate explains;
	// the window keeps room for that excess, or the sender idles between
	// bursts on paths whose delay is shorter than the burst interval.
	ackEpochStart int64
	ackEpochAcked int64
	extraAcked    windowedMax // bytes, over rounds

	// The sustained rate: bytes delivered over the last two completed
	// spans of at least sustainedWindow. Unlike the bandwidth estimate (a
	// maximum of short samples) a burst cannot inflate it much; what is
	// sized by time at the path's rate (the aggregation room, the frames
	// of large envelopes) is sized by it.
	spanStart     int64
	spanDelivered int64
	spanRates     [2]float64
	spanLimited   bool // the sender was app- or credit-limited in the span

	pacingRate float64
	cwnd       int64
	last       RateSample
}

// NewEstimator returns an estimator with no measurements, in startup.
func NewEstimator(cfg EstimatorConfig) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := &Estimator{cfg: cfg, cwnd: cfg.InitialCwnd}
	e.pacingRate = startupGain * float64(cfg.InitialCwnd) / cfg.InitialRTT.Seconds()
	return e, nil
}

func (e *Estimator) ns(now time.Time) int64 {
	if e.base.IsZero() {
		e.base = now
	}
	return int64(now.Sub(e.base))
}

func (e *Estimator) stream(id StreamID) *estStream {
	for i := range e.streams {
		if e.streams[i].id == id {
			return &e.streams[i]
		}
	}
	e.streams = append(e.streams, estStream{id: id})
	return &e.streams[len(e.streams)-1]
}

// SetAppLimited records that the sender has nothing to send, or no credit to
// send it with: frames sent until what is in flight now is delivered are
// marked app-limited, so their samples cannot lower the estimate.
func (e *Estimator) SetAppLimited() {
	e.appLimitedUntil = max(e.delivered+e.inflight, 1)
	e.spanLimited = true
}

// OnSend records a frame of n payload bytes sent at now on stream, ending at
// stream byte offset end (the stream's sent count after the frame). Offsets
// must increase per stream, except after [Estimator.Resume].
func (e *Estimator) OnSend(stream StreamID, end int64, n int, now time.Time) {
	t := e.ns(now)
	st := e.stream(stream)
	start := end - int64(n)
	if end <= st.acked || n <= 0 {
		return
	}
	start = max(start, st.acked)
	if e.inflight == 0 {
		e.firstSent, e.deliveredTime = t, t
	}
	st.records.push(sendRecord{
		start: start, end: end, sent: t,
		delivered: e.delivered, deliveredTime: e.deliveredTime, firstSent: e.firstSent,
		appLimited: e.appLimitedUntil != 0,
	})
	e.inflight += end - start
}

// OnCredit records that the peer's cumulative count of bytes received on
// stream (its consumed count, if its grants carry no received count) is now
// acked, at now, and updates the model. It returns the delivery-rate sample
// it took, if any (stale and duplicate counts give none).
func (e *Estimator) OnCredit(stream StreamID, acked int64, now time.Time) (RateSample, bool) {
	t := e.ns(now)
	st := e.stream(stream)
	if acked <= st.acked {
		return RateSample{}, false
	}
	newly := acked - st.acked
	var newest sendRecord
	found := false
	for st.records.n > 0 {
		r := st.records.front()
		if r.start >= acked {
			break
		}
		lo, hi := max(r.start, st.acked), min(r.end, acked)
		e.inflight -= hi - lo
		if r.end > acked {
			r.start = acked // partly acknowledged: the rest stays in flight
			break
		}
		newest, found = *r, true
		st.records.pop()
	}
	st.acked = acked
	e.delivered += newly
	e.deliveredTime = t
	if span := t - e.spanStart; span >= int64(sustainedWindow) {
		// A span in which the sender idled, or waited for the peer's
		// credit, measures the application or the receiver: it may raise
		// the sustained rate, never lower it (a bulk sender that pauses
		// between batches would otherwise shrink its frames after each
		// pause).
		rate := float64(e.delivered-e.spanDelivered) / time.Duration(span).Seconds()
		if !e.spanLimited || rate >= e.SustainedRate() {
			e.spanRates[0], e.spanRates[1] = e.spanRates[1], rate
		}
		e.spanStart, e.spanDelivered = t, e.delivered
		e.spanLimited = e.appLimitedUntil != 0
	}
	if !found {
		e.updateModel(t, newly, false)
		return RateSample{}, false
	}

	roundStart := newest.delivered >= e.nextRoundDelivered
	if roundStart {
		e.nextRoundDelivered = e.delivered
		e.round++
	}
	if e.appLimitedUntil != 0 && e.delivered > e.appLimitedUntil {
		e.appLimitedUntil = 0
	}
	e.firstSent = newest.sent

	rtt := t - newest.sent
	if rtt > 0 {
		e.OnRTT(time.Duration(rtt), now)
	}
	s := RateSample{
		Delivered:  e.delivered - newest.delivered,
		Interval:   time.Duration(max(newest.sent-newest.firstSent, t-newest.deliveredTime)),
		RTT:        time.Duration(rtt),
		AppLimited: newest.appLimited,
	}
	// An interval shorter than the path delay measures a burst, not the
	// path.
	if s.Interval > 0 && s.Interval >= e.MinRTT() {
		s.Rate = float64(s.Delivered) / s.Interval.Seconds()
		if bw, ok := e.bw.get(); !s.AppLimited || !ok || s.Rate >= bw {
			e.bw.update(int64(e.cfg.BandwidthRounds), e.round, s.Rate)
		}
	}
	if roundStart {
		e.checkFullPipe(s.AppLimited)
	}
	e.updateAckAggregation(t, newly)
	e.last = s
	e.updateModel(t, newly, roundStart)
	return s, true
}

// updateAckAggregation measures how far the credit acknowledged in the
// current epoch exceeds what the bandwidth estimate explains; an epoch
// ends when credit falls behind the estimate.
func (e *Estimator) updateAckAggregation(t, acked int64) {
	bw, ok := e.bw.get()
	if !ok || acked <= 0 {
		return
	}
	expected := int64(bw * time.Duration(t-e.ackEpochStart).Seconds())
	if e.ackEpochAcked <= expected {
		e.ackEpochStart, e.ackEpochAcked, expected = t, 0, 0
	}
	e.ackEpochAcked += acked
	extra := min(e.ackEpochAcked-expected, e.cwnd)
	e.extraAcked.update(extraAckedRounds, e.round, float64(extra))
}

// aggregationCwnd is the room kept for acknowledgements that arrive in
// bursts, once startup has measured the path.
func (e *Estimator) aggregationCwnd() int64 {
	extra, ok := e.extraAcked.get()
	if !ok || !e.filledPipe {
		return 0
	}
	return min(int64(extra), int64(e.SustainedRate()*extraAckedMaxTime.Seconds()))
}

// SustainedRate returns the delivery rate over the last completed spans of
// at least 20 ms (the larger of the last two), in bytes per second; 0
// until one completed. It is at most what the path carried, where the
// bandwidth estimate may count a burst that a token bucket let through.
func (e *Estimator) SustainedRate() float64 {
	return max(e.spanRates[0], e.spanRates[1])
}

// OnRTT feeds a round-trip sample (a ping's, or a frame's) into the min-RTT
// filter: a sample at or below the minimum replaces it, and so does any
// sample once the minimum is older than MinRTTWindow, which also starts a
// ProbeRTT phase at the next credit.
func (e *Estimator) OnRTT(rtt time.Duration, now time.Time) {
	if rtt <= 0 {
		return
	}
	t := e.ns(now)
	expired := e.minRTT != 0 && t-e.minRTTStamp > int64(e.cfg.MinRTTWindow)
	e.rttExpired = e.rttExpired || expired
	if e.minRTT == 0 || int64(rtt) <= e.minRTT || expired {
		e.minRTT, e.minRTTStamp = int64(rtt), t
	}
}

// checkFullPipe ends startup once the bandwidth estimate grew less than 25%
// over three rounds of samples that were not app-limited.
func (e *Estimator) checkFullPipe(appLimited bool) {
	if e.filledPipe || appLimited {
		return
	}
	bw, _ := e.bw.get()
	if bw >= e.fullBw*fullBandwidthGrowth {
		e.fullBw, e.fullBwCount = bw, 0
		return
	}
	e.fullBwCount++
	if e.fullBwCount >= fullBandwidthRounds {
		e.filledPipe = true
	}
}

func (e *Estimator) updateModel(t, acked int64, roundStart bool) {
	if e.mode == ModeStartup && e.filledPipe {
		e.mode = ModeDrain
	}
	if e.rttExpired && e.mode != ModeProbeRTT {
		e.mode, e.priorCwnd, e.probeRTTDone = ModeProbeRTT, e.cwnd, 0
	}
	e.rttExpired = false
	if e.mode == ModeProbeRTT {
		e.probeRTT(t, roundStart)
	}
	if e.mode == ModeDrain && e.inflight <= e.BDP() {
		e.enterProbeBandwidth(t)
	}
	if e.mode == ModeProbeBandwidth && e.nextPhase(t) {
		e.cycleIndex = (e.cycleIndex + 1) % probePhases
		e.cycleStamp = t
	}
	e.setPacingRate()
	e.setCwnd(acked)
}

// probeRTT waits for in-flight to fall to MinCwnd, holds it there for
// probeRTTDuration and a round trip, then takes the delay seen as fresh and
// resumes.
func (e *Estimator) probeRTT(t int64, roundStart bool) {
	switch {
	case e.probeRTTDone == 0 && e.inflight <= e.cfg.MinCwnd:
		e.probeRTTDone = t + int64(probeRTTDuration)
		e.probeRTTRoundDone = false
		e.nextRoundDelivered = e.delivered
	case e.probeRTTDone != 0:
		e.probeRTTRoundDone = e.probeRTTRoundDone || roundStart
		if e.probeRTTRoundDone && t > e.probeRTTDone {
			e.minRTTStamp = t
			e.cwnd = max(e.cwnd, e.priorCwnd)
			e.probeRTTDone = 0
			if e.filledPipe {
				e.enterProbeBandwidth(t)
			} else {
				e.mode = ModeStartup
			}
		}
	}
}

func (e *Estimator) enterProbeBandwidth(t int64) {
	e.mode = ModeProbeBandwidth
	// BBR starts at a random phase other than the drain one; a phase chosen
	// from the round count is as good and keeps runs reproducible.
	e.cycleIndex = int(e.round % probePhases)
	if e.cycleIndex == 1 {
		e.cycleIndex = 2
	}
	e.cycleStamp = t
}

func (e *Estimator) nextPhase(t int64) bool {
	elapsed := time.Duration(t - e.cycleStamp)
	full := elapsed > e.MinRTT()
	switch g := e.probeGain(e.cycleIndex); {
	case g > 1:
		// Probe until a round trip passed and the extra is in flight, or
		// give up after three when credit or the application held it back.
		return (full && float64(e.inflight) >= g*float64(e.BDP())) || elapsed > 3*e.MinRTT()
	case g < 1:
		// Unlike BBR v1, stay until the queue is gone (as BBR v2's
		// probe-down does): an overestimate or a probe must not leave a
		// standing queue that small envelopes wait behind.
		return e.inflight <= e.BDP() || elapsed > 4*e.MinRTT()
	default:
		return full
	}
}

func (e *Estimator) gains() (pacing, cwnd float64) {
	switch e.mode {
	case ModeStartup:
		return startupGain, startupGain
	case ModeDrain:
		return drainGain, startupGain
	case ModeProbeRTT:
		return 1, 1
	default:
		return e.probeGain(e.cycleIndex), cwndGain
	}
}

func (e *Estimator) setPacingRate() {
	bw, ok := e.bw.get()
	if !ok {
		return
	}
	g, _ := e.gains()
	if rate := g * bw; e.filledPipe || rate > e.pacingRate {
		e.pacingRate = rate
	}
}

func (e *Estimator) setCwnd(acked int64) {
	if _, ok := e.bw.get(); !ok {
		return
	}
	if e.mode == ModeProbeRTT {
		e.cwnd = e.cfg.MinCwnd
		return
	}
	_, g := e.gains()
	target := max(int64(g*float64(e.BDP()))+e.aggregationCwnd(), e.cfg.MinCwnd)
	switch {
	case e.filledPipe:
		e.cwnd = min(e.cwnd+acked, target)
	case e.cwnd < target || e.delivered < e.cfg.InitialCwnd:
		e.cwnd += acked
	}
	e.cwnd = max(e.cwnd, e.cfg.MinCwnd)
}

// Resume forgets what was in flight on the broken connection (the session
// resends it, recording the resends with [Estimator.OnSend] or
// [Scheduler.Resend]) and keeps the path measures.
func (e *Estimator) Resume() {
	for i := range e.streams {
		e.streams[i].records.head, e.streams[i].records.n = 0, 0
	}
	e.inflight = 0
	e.appLimitedUntil = 0
}

// Bandwidth returns the bandwidth estimate in bytes per second (0 before the
// first sample).
func (e *Estimator) Bandwidth() float64 {
	bw, _ := e.bw.get()
	return bw
}

// MinRTT returns the minimum round trip over the filter window, or
// InitialRTT before the first sample.
func (e *Estimator) MinRTT() time.Duration {
	if e.minRTT != 0 {
		return time.Duration(e.minRTT)
	}
	return e.cfg.InitialRTT
}

// RTTSampled reports whether MinRTT comes from a sample rather than
// InitialRTT.
func (e *Estimator) RTTSampled() bool { return e.minRTT != 0 }

// BDP returns the bandwidth-delay product in bytes (InitialCwnd before the
// first bandwidth sample).
func (e *Estimator) BDP() int64 {
	bw, ok := e.bw.get()
	if !ok {
		return e.cfg.InitialCwnd
	}
	return int64(bw * e.MinRTT().Seconds())
}

// PacingRate returns the rate to pace data at, in bytes per second.
func (e *Estimator) PacingRate() float64 { return e.pacingRate }

// CWnd returns the congestion window in bytes: data may be sent while
// [Estimator.Inflight] is below it.
func (e *Estimator) CWnd() int64 { return e.cwnd }

// Inflight returns the bytes sent and not yet credited by the peer.
func (e *Estimator) Inflight() int64 { return e.inflight }

// Delivered returns the cumulative number of bytes credited by the peer.
func (e *Estimator) Delivered() int64 { return e.delivered }

// Mode returns the current phase.
func (e *Estimator) Mode() Mode { return e.mode }

// Round returns the number of round trips counted so far.
func (e *Estimator) Round() int64 { return e.round }

// LastSample returns the most recent delivery-rate sample.
func (e *Estimator) LastSample() RateSample { return e.last }
