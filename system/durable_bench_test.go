package system_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// The cost of a state change that must be stored before its reply leaves:
// asks that add to counters over 1024 keys, from 32 askers per processor
// (64 on the 2-core machine of BENCHMARKS.md), so that writes share their
// batches as a loaded server's do.

func benchStoredAdds(b *testing.B, ref func(key string) actor.Ref[CountMsg]) {
	benchAdds(b, false, ref)
}

// benchAdds is benchStoredAdds, each ask with an idempotency key of its
// own if keyed.
func benchAdds(b *testing.B, keyed bool, ref func(key string) actor.Ref[CountMsg]) {
	ctx := systemtest.Ctx(b)
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			key := fmt.Sprint("k", n%1024)
			actx := ctx
			if keyed {
				actx = actor.WithIdempotencyKey(ctx, fmt.Sprint("add-", n))
			}
			if _, err := actor.Ask(actx, ref(key), DAdd{N: 1}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStoredAsk: a standalone system, the state in memory (the
// plain counter is the baseline), on disk, and on disk with Sync.
func BenchmarkStoredAsk(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []actor.Option
		cfg  func(b *testing.B) system.Config
	}{
		{"plain", nil, func(*testing.B) system.Config { return system.Config{} }},
		{"durable-memory", []actor.Option{actor.Durable()}, func(*testing.B) system.Config { return system.Config{} }},
		{"durable-disk", []actor.Option{actor.Durable()}, func(b *testing.B) system.Config { return system.Config{DataDir: b.TempDir()} }},
		{"durable-sync", []actor.Option{actor.Durable()}, func(b *testing.B) system.Config {
			return system.Config{DataDir: b.TempDir(), Sync: true}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			def := counterDef("counter", nil, tc.opts...)
			sys := newStandalone(b, tc.cfg(b), def)
			benchStoredAdds(b, func(key string) actor.Ref[CountMsg] { return def.Ref(sys, key) })
		})
	}
	// An idempotency key on every ask: its answer is kept in the key's
	// record (continuity.go), against durable-memory above.
	b.Run("durable-memory-keyed", func(b *testing.B) {
		def := counterDef("counter", nil, actor.Durable())
		sys := newStandalone(b, system.Config{}, def)
		benchAdds(b, true, func(key string) actor.Ref[CountMsg] { return def.Ref(sys, key) })
	})
}

// BenchmarkReplicatedAsk: three members in this process over loopback,
// asked through each in turn, with 1 replica (the baseline) and with 3 at
// WriteMajority.
func BenchmarkReplicatedAsk(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprint("replicas-", n), func(b *testing.B) {
			opts := []actor.Option{actor.WithReplicas(n, actor.WriteMajority)}
			if n == 1 {
				opts = append(opts, actor.Durable())
			}
			def := counterDef("counter", nil, opts...)
			systems := systemtest.StartCluster(b, 3, nil, def)
			var turn atomic.Int64
			benchStoredAdds(b, func(key string) actor.Ref[CountMsg] {
				return def.Ref(systems[turn.Add(1)%3], key)
			})
		})
	}
}
