package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/cluster"
)

// Members is troupe_members.
var Members = prometheus.NewDesc("troupe_members",
	"Cluster members as this process places keys on them, by status (joining counts apart from the others).",
	[]string{"status"}, nil)

// memberStatuses are the values of troupe_members's status label, every
// one reported (zero included) so that the series stay the same.
var memberStatuses = [...]string{"alive", "suspect", "dead", "leaving", "joining"}

// CollectMembers reports ms by status.
func CollectMembers(ch chan<- prometheus.Metric, ms []cluster.Member) {
	var n [len(memberStatuses)]int
	for _, m := range ms {
		n[statusIndex(m)]++
	}
	for i, status := range memberStatuses {
		Gauge(ch, Members, float64(n[i]), status)
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
