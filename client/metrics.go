package client

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/metrics"
)

// collector exposes a client's counters to Prometheus (Config.Metrics):
// the families it shares with the members (package internal/metrics),
// with the same names and meanings, each series fixed by the actor
// types the client has taken refs of and fixed sets of labels. Most are
// read at scrape time from what the client counts anyway (its member
// list, the transport, the router); tells and asks are counted as they
// go (metrics.Meters).
type collector struct {
	c    *Client
	proc metrics.Process
	met  *metrics.Meters
}

// tellSent is the outcome label of a client's tells that succeed: they
// are counted as sent, here, where no actor takes them; the member that
// handles one counts it again as ok.
const tellSent = "sent"

// Describe implements prometheus.Collector.
func (col *collector) Describe(ch chan<- *prometheus.Desc) {
	col.proc.Describe(ch)
	col.met.Describe(ch)
	ch <- metrics.Ready
	ch <- metrics.AsksInFlight
	ch <- metrics.Members
	for _, d := range metrics.WireDescs {
		ch <- d
	}
	for _, d := range metrics.RelayDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (col *collector) Collect(ch chan<- prometheus.Metric) {
	c := col.c
	col.met.Collect(ch, tellSent)
	col.proc.Collect(ch)
	ms := c.Members()
	metrics.Gauge(ch, metrics.Ready, metrics.Bool(c.readyWith(ms)))
	metrics.Gauge(ch, metrics.AsksInFlight, float64(c.h.AsksOut.Load()))
	metrics.CollectMembers(ch, ms)
	st := c.tr.Stats()
	metrics.CollectWire(ch, st, st) // one transport for the client's life
	metrics.CollectRelay(ch, c.router.Relays())
}

// Ready reports whether the client can send: it is open and its member
// list holds an alive member. It is what the troupe_ready metric
// reports, and what Handler's /readyz answers.
func (c *Client) Ready() bool { return c.readyWith(c.Members()) }

// readyWith is Ready with ms, the client's member list.
func (c *Client) readyWith(ms []cluster.Member) bool { return !c.h.Closed() && aliveIn(ms) }

// aliveIn reports whether ms holds an alive member that finished joining.
func aliveIn(ms []cluster.Member) bool {
	for _, m := range ms {
		if m.Status == cluster.StatusAlive && !m.Joining {
			return true
		}
	}
	return false
}

// startMetrics registers the client's collector on cfg.Metrics, if set.
func (c *Client) startMetrics(started time.Time, met *metrics.Meters) error {
	if c.cfg.Metrics == nil {
		return nil
	}
	col := &collector{c: c, proc: metrics.NewProcess(started), met: met}
	if err := c.cfg.Metrics.Register(col); err != nil {
		return err
	}
	c.unregister = func() { c.cfg.Metrics.Unregister(col) }
	return nil
}
