package noderecord

import (
	"strings"
	"time"
)

// full returns a record with every field set, within its limits.
func full() Record {
	return Record{
		Cluster:      "shop",
		Node:         "10.0.0.5:7400",
		Role:         "member",
		Incarnation:  "7f3a9c",
		DataAddr:     "10.0.0.5:7400",
		AdminAddr:    "10.0.0.5:7401",
		BuildVersion: "v1.2.3",
		Started:      time.UnixMilli(1_700_000_000_123).UTC(),
		Seq:          42,
		Observed:     time.UnixMilli(1_700_000_005_456).UTC(),
		Health:       Degraded,
		Ready:        true,
		Counters:     Counters{Messages: 1 << 40, Errors: 3, Activations: 17, Bytes: 1 << 50, ReplicationLag: 250 * time.Millisecond},
		Labels:       map[string]string{"region": "eu-west", "zone": "b", "host": "h1"},
	}
}

// largest returns a record with every field at its limit.
func largest() Record {
	r := full()
	r.Cluster, r.Node, r.Role, r.Incarnation = strings.Repeat("c", MaxFieldBytes), strings.Repeat("n", MaxFieldBytes), strings.Repeat("r", MaxFieldBytes), strings.Repeat("i", MaxFieldBytes)
	r.DataAddr, r.AdminAddr = strings.Repeat("d", MaxFieldBytes), strings.Repeat("a", MaxFieldBytes)
	r.BuildVersion = strings.Repeat("v", MaxFieldBytes)
	r.Labels = map[string]string{}
	for i := range MaxLabels {
		k := strings.Repeat(string(rune('a'+i)), MaxLabelKeyBytes)
		r.Labels[k] = strings.Repeat("x", MaxFieldBytes)
	}
	return r
}
