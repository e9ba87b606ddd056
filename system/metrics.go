package system

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/transport"
)

// collector exposes a system's counters to Prometheus. Most it reads at
// scrape time from what the runtime counts anyway (Stats, the membership
// view, the transport, Readiness), at no cost on the message path; the
// outcomes of tells and asks and the durations of asks, which no
// snapshot can give, the runtime counts as it goes (meters).
// Every series it reports is fixed by the system's kind (member or not,
// with a store or not): no label takes a key, an address or an error.
type collector struct {
	s       *System
	started time.Time
	version string
}

// The metrics a system reports. docs/operations.md lists them.
var (
	descBuildInfo = prometheus.NewDesc("troupe_build_info",
		"Always 1; the labels name the Troupe module's version and the Go version it was built with.",
		[]string{"version", "goversion"}, nil)
	descUptime = prometheus.NewDesc("troupe_uptime_seconds",
		"Seconds since the system started.", nil, nil)
	descReady = prometheus.NewDesc("troupe_ready",
		"1 when every readiness check passes (see /readyz), 0 otherwise.", nil, nil)
	descActivations = prometheus.NewDesc("troupe_activations",
		"Activated keys, idle ones included.", nil, nil)
	descQueued = prometheus.NewDesc("troupe_mailbox_queued_messages",
		"Messages waiting in mailboxes.", nil, nil)
	descDeepest = prometheus.NewDesc("troupe_mailbox_deepest_messages",
		"Messages waiting in the longest mailbox.", nil, nil)
	descAsks = prometheus.NewDesc("troupe_asks_in_flight",
		"Asks waiting for a reply.", nil, nil)
	descRestarts = prometheus.NewDesc("troupe_restarts_total",
		"Failures that restarted an actor or its body.", nil, nil)
	descRejoins = prometheus.NewDesc("troupe_rejoins_total",
		"Times this member, removed by the cluster, rejoined with a new incarnation.", nil, nil)
	descMembers = prometheus.NewDesc("troupe_members",
		"Cluster members as this member places keys on them, by status (joining counts apart from the others).",
		[]string{"status"}, nil)
	descReceiving = prometheus.NewDesc("troupe_replication_receiving_ranges",
		"Ranges of the ring this member is still receiving (catching up) before its copies count.", nil, nil)
	descReceived = prometheus.NewDesc("troupe_replication_received_bytes_total",
		"Bytes of stored state received from other members catching up.", nil, nil)
	descWrites = prometheus.NewDesc("troupe_replication_writes_total",
		"Writes and deletes of actor state this member made as the owner, by outcome: ok (met the write level), refused (over the value limit, nothing written), failed (level not met, a newer owner, resigned, closed: it may or may not have happened).",
		[]string{"outcome"}, nil)

	descSuspicions = prometheus.NewDesc("troupe_membership_suspicions_total",
		"Accusations this member made: a member it found silent, or failed to dial, became suspect with this member among its accusers.", nil, nil)
	descRefutations = prometheus.NewDesc("troupe_membership_refutations_total",
		"Verdicts about this member (suspect, dead) it refuted by raising its incarnation.", nil, nil)
	descDeaths = prometheus.NewDesc("troupe_membership_deaths_total",
		"Members this member declared dead.", nil, nil)

	descSentFrames = prometheus.NewDesc("troupe_wire_sent_frames_total",
		"Frames written to other members and clients after the handshake, by stream (connection frames count on control).",
		[]string{"stream"}, nil)
	descSentBytes = prometheus.NewDesc("troupe_wire_sent_bytes_total",
		"Bytes of the frames written, headers included, after compression, by stream.",
		[]string{"stream"}, nil)
	descReceivedFrames = prometheus.NewDesc("troupe_wire_received_frames_total",
		"Frames read from other members and clients after the handshake, by stream.",
		[]string{"stream"}, nil)
	descReceivedBytes = prometheus.NewDesc("troupe_wire_received_bytes_total",
		"Bytes of the frames read, headers included, as they came (compressed), by stream.",
		[]string{"stream"}, nil)
	descResumes = prometheus.NewDesc("troupe_wire_resumes_total",
		"Sessions with a peer that continued on a new connection after one broke, resending what the peer had not received.", nil, nil)
	descConnected = prometheus.NewDesc("troupe_wire_connected_peers",
		"Peers (members and clients) with a connection now.", nil, nil)
	descRTT = prometheus.NewDesc("troupe_wire_rtt_max_seconds",
		"The largest round-trip time over the connected peers: the pacing estimator's minimum round trip to each, measured from credits and pings; 0 before any.", nil, nil)
	descPacing = prometheus.NewDesc("troupe_wire_pacing_rate_bytes_per_second",
		"The sum over connected peers of the rate data is paced at: what the transport would send at most, not what it sends.", nil, nil)
)

// streams are the values of the troupe_wire_* metrics' stream label,
// indexed by transport.StreamID.
var streams = func() (names [transport.NumStreams]string) {
	for i := range names {
		names[i] = transport.StreamID(i).String()
	}
	return names
}()

// meters are the counts the runtime keeps on the message path, for what
// no snapshot can tell afterwards (outcomes, durations): one
// host.TypeMeter per registered actor type, which the type's runtime
// holds, so that a message costs an atomic add at most, never a lookup
// by label. Their label values come from the registered definitions and
// fixed sets only.
type meters struct {
	mu    sync.Mutex // guards types, appended to as types register
	types []typeMeter
}

type typeMeter struct {
	name string
	m    *host.TypeMeter
}

var (
	descMessages = prometheus.NewDesc("troupe_messages_total",
		"Tells and asks by actor type, kind (tell, ask) and outcome (ok, failed, refused, timeout, undelivered). Asks are counted where they are made; tells that succeed where they are handled (tells, timer messages and piped answers the actors here took from their mailboxes), tells that fail where they were made.",
		[]string{"type", "kind", "outcome"}, nil)
	descAskSeconds = prometheus.NewDesc("troupe_ask_duration_seconds",
		"Asks made here by actor type: seconds from the call to its return, as the caller waited, whatever the outcome.",
		[]string{"type"}, nil)
)

// askBuckets are host.AskBounds in seconds.
var askBuckets = func() (b [len(host.AskBounds)]float64) {
	for i, d := range host.AskBounds {
		b[i] = d.Seconds()
	}
	return b
}()

// typeMeter makes the meter of actor type typ (host.Settings.Meter).
func (m *meters) typeMeter(typ string) *host.TypeMeter {
	tm := new(host.TypeMeter)
	m.mu.Lock()
	m.types = append(m.types, typeMeter{name: typ, m: tm})
	m.mu.Unlock()
	return tm
}

// collect reports every type's series, zero included, so that they stay
// the same.
func (m *meters) collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	types := m.types
	m.mu.Unlock()
	for _, t := range types {
		for o := range host.NumOutcomes {
			ch <- prometheus.MustNewConstMetric(descMessages, prometheus.CounterValue, float64(t.m.Asks(o)), t.name, "ask", o.String())
			if o != host.OutcomeFailed { // a tell's handler answers nobody
				ch <- prometheus.MustNewConstMetric(descMessages, prometheus.CounterValue, float64(t.m.Tells[o].Load()), t.name, "tell", o.String())
			}
		}
		var count uint64
		buckets := make(map[float64]uint64, len(askBuckets))
		for i, le := range askBuckets {
			count += t.m.AskBuckets[0][i].Load() + t.m.AskBuckets[1][i].Load()
			buckets[le] = count
		}
		count += t.m.AskBuckets[0][len(askBuckets)].Load() + t.m.AskBuckets[1][len(askBuckets)].Load()
		sum := time.Duration(t.m.AskNanos.Load()).Seconds()
		ch <- prometheus.MustNewConstHistogram(descAskSeconds, count, sum, buckets, t.name)
	}
}

// memberStatuses are the values of troupe_members's status label, every
// one reported (zero included) so that the series stay the same.
var memberStatuses = [...]string{"alive", "suspect", "dead", "leaving", "joining"}

func newCollector(s *System) *collector {
	return &collector{s: s, started: time.Now(), version: moduleVersion()}
}

// moduleVersion returns the version of the Troupe module this program was
// built with, "(devel)" when it is the main module or unknown.
func moduleVersion() string {
	const path = "github.com/troupe-go/troupe"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Path == path && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			if d.Version != "" {
				return d.Version
			}
		}
	}
	return "(devel)"
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
	if c.s.met != nil {
		ch <- descMessages
		ch <- descAskSeconds
	}
}

func (c *collector) descs() []*prometheus.Desc {
	d := []*prometheus.Desc{descBuildInfo, descUptime, descReady, descActivations, descQueued, descDeepest, descAsks, descRestarts}
	if c.s.m != nil {
		d = append(d, descRejoins, descMembers, descSuspicions, descRefutations, descDeaths,
			descSentFrames, descSentBytes, descReceivedFrames, descReceivedBytes, descResumes, descConnected, descRTT, descPacing)
	}
	if c.s.st != nil {
		d = append(d, descReceiving, descReceived, descWrites)
	}
	return d
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	if m := c.s.met; m != nil {
		m.collect(ch)
	}
	st := c.s.Stats()
	gauge(descBuildInfo, 1, c.version, runtime.Version())
	gauge(descUptime, time.Since(c.started).Seconds())
	ready := 0.0
	if c.s.Readiness().Ready {
		ready = 1
	}
	gauge(descReady, ready)
	gauge(descActivations, float64(st.Active))
	gauge(descQueued, float64(st.Queued))
	gauge(descDeepest, float64(st.DeepestMailbox))
	gauge(descAsks, float64(st.AsksInFlight))
	counter(descRestarts, float64(st.Restarts))
	if c.s.m != nil {
		counter(descRejoins, float64(st.Rejoins))
		var n [len(memberStatuses)]int
		for _, m := range c.s.Members() {
			n[statusIndex(m)]++
		}
		for i, status := range memberStatuses {
			gauge(descMembers, float64(n[i]), status)
		}
		total, now := c.s.m.counts()
		counter(descSuspicions, float64(total.detector.Suspicions))
		counter(descRefutations, float64(total.detector.Refutations))
		counter(descDeaths, float64(total.detector.Deaths))
		for i, stream := range streams {
			counter(descSentFrames, float64(total.wire.Sent[i].Frames), stream)
			counter(descSentBytes, float64(total.wire.Sent[i].Bytes), stream)
			counter(descReceivedFrames, float64(total.wire.Received[i].Frames), stream)
			counter(descReceivedBytes, float64(total.wire.Received[i].Bytes), stream)
		}
		counter(descResumes, float64(total.wire.Resumes))
		gauge(descConnected, float64(now.Connected))
		gauge(descRTT, now.MaxRTT.Seconds())
		gauge(descPacing, now.PacingRate)
	}
	if c.s.st != nil {
		gauge(descReceiving, float64(st.Receiving))
		counter(descReceived, float64(st.ReceivedBytes))
		for i, outcome := range writeOutcomes {
			counter(descWrites, float64(c.s.st.writes[i].Load()), outcome)
		}
	}
}

// statusIndex returns m's index in memberStatuses.
func statusIndex(m cluster.Member) int {
	switch {
	case m.Joining:
		return 4
	case m.Status == cluster.StatusSuspect:
		return 1
	case m.Status == cluster.StatusDead:
		return 2
	case m.Status == cluster.StatusLeaving:
		return 3
	}
	return 0
}
