package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/internal/systemtest"
)

// A client and one member in one process over loopback TCP, with the
// client's metrics off and on: compare the two in one run (benchstat, or
// the ratio of the ns/op) to see what the metrics cost a message.

func BenchmarkClientAsk(b *testing.B) {
	for _, metrics := range []bool{false, true} {
		b.Run(metricsName(metrics), func(b *testing.B) {
			c := benchClient(b, metrics)
			ref := Counter.Ref(c, "k")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := actor.Ask(ctx, ref, Get{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkClientTell(b *testing.B) {
	for _, metrics := range []bool{false, true} {
		b.Run(metricsName(metrics), func(b *testing.B) {
			c := benchClient(b, metrics)
			ref := Counter.Ref(c, "k")
			ctx := systemtest.Ctx(b)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if err := ref.Tell(ctx, Add{N: 1}); err != nil {
					b.Fatal(err)
				}
				n++
			}
			// Every tell handled: the time includes delivery.
			systemtest.WaitUntil(b, "every tell counted", func() bool {
				got, err := actor.Ask(ctx, ref, Get{})
				return err == nil && got == n
			})
		})
	}
}

func metricsName(on bool) string {
	if on {
		return "metrics=on"
	}
	return "metrics=off"
}

// benchClient starts a member hosting Counter and a client of it, with
// its metrics on a registry of its own when metrics is set.
func benchClient(b *testing.B, metrics bool) *client.Client {
	b.Helper()
	systems := systemtest.StartCluster(b, 1, nil, Counter)
	cfg := client.Config{ClusterName: "test", Seeds: []string{systems[0].Addr()}, SyncInterval: time.Second}
	if metrics {
		cfg.Metrics = prometheus.NewRegistry()
	}
	c, err := client.New(systemtest.Ctx(b), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
