package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/internal/remote"
)

// Relaying's metrics (docs/cluster.md, "Relaying around a broken link").
var (
	RelaySent = prometheus.NewDesc("troupe_relay_sent_messages_total",
		"Tells and asks sent through another member because the link to the key's owner was silent (each sending of an ask counts).", nil, nil)
	RelaySilent = prometheus.NewDesc("troupe_relay_silent_members",
		"Members whose link counts as broken now (silent for the silence setting): what is sent to them goes through another member.", nil, nil)
)

// RelayDescs are the descriptors of CollectRelay.
var RelayDescs = []*prometheus.Desc{RelaySent, RelaySilent}

// CollectRelay reports r, a router's relaying.
func CollectRelay(ch chan<- prometheus.Metric, r remote.RelayStats) {
	Counter(ch, RelaySent, float64(r.Sent))
	Gauge(ch, RelaySilent, float64(r.Silent))
}
