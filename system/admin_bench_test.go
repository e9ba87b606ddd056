package system_test

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// BenchmarkMetricsGather measures one scrape's collection (Gather) of a
// member of three with 10,000 active keys (of a type kept in memory only,
// so that no replication runs meanwhile): the whole cost of the metrics,
// paid by the scraper, none on the message path.
func BenchmarkMetricsGather(b *testing.B) {
	def := counterDef("gcounter", nil)
	rep := counterDef("grep", nil, actor.WithReplicas(3, actor.WriteMajority)) // the replication metrics too
	reg := prometheus.NewRegistry()
	systems := systemtest.StartCluster(b, 3, func(i int, cfg *system.Config) {
		if i == 0 {
			cfg.Metrics = reg
		}
	}, def, rep)
	ctx := systemtest.Ctx(b)
	for i := range 10000 {
		if err := def.Ref(systems[0], "k"+strconv.Itoa(i)).Tell(ctx, DTick{}); err != nil {
			b.Fatal(err)
		}
	}
	systemtest.WaitUntil(b, "every key active", func() bool {
		n := 0
		for _, s := range systems {
			n += s.Stats().Active
		}
		return n == 10000 && systems[0].Stats().Queued == 0
	})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
