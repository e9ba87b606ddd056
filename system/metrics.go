package system

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/metrics"
)

// collector exposes a system's counters to Prometheus. Most it reads at
// scrape time from what the runtime counts anyway (Stats, the membership
// view, the transport, Readiness), at no cost on the message path; the
// outcomes of tells and asks and the durations of asks, which no
// snapshot can give, the runtime counts as it goes (metrics.Meters).
// Every series it reports is fixed by the system's kind (member or not,
// with a store or not): no label takes a key, an address or an error.
type collector struct {
	s    *System
	proc metrics.Process
}

// The metrics only a member reports; internal/metrics holds those a
// client reports too. docs/operations.md lists them all.
var (
	descActivations = prometheus.NewDesc("troupe_activations",
		"Activated keys, idle ones included.", nil, nil)
	descQueued = prometheus.NewDesc("troupe_mailbox_queued_messages",
		"Messages waiting in mailboxes.", nil, nil)
	descDeepest = prometheus.NewDesc("troupe_mailbox_deepest_messages",
		"Messages waiting in the longest mailbox.", nil, nil)
	descRestarts = prometheus.NewDesc("troupe_restarts_total",
		"Failures that restarted an actor or its body.", nil, nil)
	descRejoins = prometheus.NewDesc("troupe_rejoins_total",
		"Times this member, removed by the cluster, rejoined with a new incarnation.", nil, nil)
	descReceiving = prometheus.NewDesc("troupe_replication_receiving_ranges",
		"Ranges of the ring this member is still receiving (catching up) before its copies count.", nil, nil)
	descReceived = prometheus.NewDesc("troupe_replication_received_bytes_total",
		"Bytes of stored state received from other members catching up.", nil, nil)
	descWrites = prometheus.NewDesc("troupe_replication_writes_total",
		"Writes and deletes of actor state this member made as the owner, by outcome: ok (met the write level), refused (over the value limit, nothing written), failed (level not met, a newer owner, resigned, closed: it may or may not have happened).",
		[]string{"outcome"}, nil)
	descCollected = prometheus.NewDesc("troupe_replication_tombstones_collected_total",
		"Deleted keys this member collected as their owner once their tombstones were older than Config.TombstoneAge: only the key's promise stays on its replicas.", nil, nil)

	descSuspicions = prometheus.NewDesc("troupe_membership_suspicions_total",
		"Accusations this member made: a member it found silent, or failed to dial, became suspect with this member among its accusers.", nil, nil)
	descRefutations = prometheus.NewDesc("troupe_membership_refutations_total",
		"Verdicts about this member (suspect, dead) it refuted by raising its incarnation.", nil, nil)
	descDeaths = prometheus.NewDesc("troupe_membership_deaths_total",
		"Members this member declared dead.", nil, nil)
)

func newCollector(s *System) *collector {
	return &collector{s: s, proc: metrics.NewProcess(time.Now())}
}

// moduleVersion returns the version of the Troupe module this program was
// built with, "(devel)" when it is the main module or unknown.
func moduleVersion() string { return metrics.ModuleVersion() }

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.proc.Describe(ch)
	for _, d := range c.descs() {
		ch <- d
	}
	if c.s.met != nil {
		c.s.met.Describe(ch)
	}
}

func (c *collector) descs() []*prometheus.Desc {
	d := []*prometheus.Desc{metrics.Ready, descActivations, descQueued, descDeepest, metrics.AsksInFlight, descRestarts}
	if c.s.m != nil {
		d = append(d, descRejoins, metrics.Members, descSuspicions, descRefutations, descDeaths)
		d = append(d, metrics.WireDescs...)
		d = append(d, metrics.RelayDescs...)
	}
	if c.s.st != nil {
		d = append(d, descReceiving, descReceived, descWrites, descCollected)
	}
	return d
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) { metrics.Gauge(ch, d, v, labels...) }
	counter := func(d *prometheus.Desc, v float64, labels ...string) { metrics.Counter(ch, d, v, labels...) }
	if m := c.s.met; m != nil {
		m.Collect(ch, host.OutcomeOK.String())
	}
	st := c.s.Stats()
	c.proc.Collect(ch)
	gauge(metrics.Ready, metrics.Bool(c.s.Readiness().Ready))
	gauge(descActivations, float64(st.Active))
	gauge(descQueued, float64(st.Queued))
	gauge(descDeepest, float64(st.DeepestMailbox))
	gauge(metrics.AsksInFlight, float64(st.AsksInFlight))
	counter(descRestarts, float64(st.Restarts))
	if c.s.m != nil {
		counter(descRejoins, float64(st.Rejoins))
		metrics.CollectMembers(ch, c.s.Members())
		total, now := c.s.m.counts()
		counter(descSuspicions, float64(total.detector.Suspicions))
		counter(descRefutations, float64(total.detector.Refutations))
		counter(descDeaths, float64(total.detector.Deaths))
		metrics.CollectWire(ch, total.wire, now)
		metrics.CollectRelay(ch, c.s.m.router.Relays())
	}
	if c.s.st != nil {
		gauge(descReceiving, float64(st.Receiving))
		counter(descReceived, float64(st.ReceivedBytes))
		for i, outcome := range writeOutcomes {
			counter(descWrites, float64(c.s.st.writes[i].Load()), outcome)
		}
		counter(descCollected, float64(c.s.st.collected.Load()))
	}
}
