package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/internal/host"
)

// Meters are the counts the runtime keeps on the message path, for what
// no snapshot can tell afterwards (outcomes, durations): one
// host.TypeMeter per registered actor type, which the type's runtime
// holds, so that a message costs an atomic add at most, never a lookup
// by label. Their label values come from the registered definitions and
// fixed sets only. The zero value is ready to use.
type Meters struct {
	mu    sync.Mutex // guards types, appended to as types register
	types []typeMeter
}

type typeMeter struct {
	name string
	m    *host.TypeMeter
}

var (
	// Messages is troupe_messages_total.
	Messages = prometheus.NewDesc("troupe_messages_total",
		"Tells and asks by actor type, kind (tell, ask) and outcome (ok, failed, refused, timeout, undelivered; sent on a client). Asks are counted where they are made; tells that succeed where they are handled (tells, timer messages and piped answers the actors here took from their mailboxes), or by a client as sent; tells that fail where they were made.",
		[]string{"type", "kind", "outcome"}, nil)
	// AskSeconds is troupe_ask_duration_seconds.
	AskSeconds = prometheus.NewDesc("troupe_ask_duration_seconds",
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

// TypeMeter makes the meter of actor type typ (host.Settings.Meter).
func (m *Meters) TypeMeter(typ string) *host.TypeMeter {
	tm := new(host.TypeMeter)
	m.mu.Lock()
	m.types = append(m.types, typeMeter{name: typ, m: tm})
	m.mu.Unlock()
	return tm
}

// Describe sends the descriptors of Collect.
func (m *Meters) Describe(ch chan<- *prometheus.Desc) {
	ch <- Messages
	ch <- AskSeconds
}

// Collect reports every type's series, zero included, so that they stay
// the same. tellOK is the outcome label of the tells counted in
// host.OutcomeOK: "ok" where they are handled (a member), "sent" where
// they are made (a client, which handles none).
func (m *Meters) Collect(ch chan<- prometheus.Metric, tellOK string) {
	for _, t := range m.snapshot() {
		for o := range host.NumOutcomes {
			ch <- prometheus.MustNewConstMetric(Messages, prometheus.CounterValue, float64(t.m.Asks(o)), t.name, "ask", o.String())
			switch o {
			case host.OutcomeFailed: // a tell's handler answers nobody
			case host.OutcomeOK:
				ch <- prometheus.MustNewConstMetric(Messages, prometheus.CounterValue, float64(t.m.Tells[o].Load()), t.name, "tell", tellOK)
			default:
				ch <- prometheus.MustNewConstMetric(Messages, prometheus.CounterValue, float64(t.m.Tells[o].Load()), t.name, "tell", o.String())
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
		ch <- prometheus.MustNewConstHistogram(AskSeconds, count, sum, buckets, t.name)
	}
}

// Total sums the tells and asks every type counted, all outcomes.
func (m *Meters) Total() uint64 {
	var n uint64
	for _, t := range m.snapshot() {
		for o := range host.NumOutcomes {
			n += t.m.Tells[o].Load() + t.m.Asks(o)
		}
	}
	return n
}

func (m *Meters) snapshot() []typeMeter {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.types
}
