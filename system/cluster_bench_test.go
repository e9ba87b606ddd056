package system_test

import (
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
)

// Two members in one process over loopback TCP: the cost of a message to
// a key on the other member, both ends included.

func BenchmarkRemoteTell(b *testing.B) {
	systems := benchCluster(b)
	key := benchKey(b, systems[0].Addr(), systems[1].Addr(), systems)
	ref := ccounter.Ref(systems[0], key)
	ctx := systemtest.Ctx(b)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for range b.N {
		if err := ref.Tell(ctx, Add{N: 1}); err != nil {
			b.Fatal(err)
		}
	}
	// Counted on the owner: the time includes delivery.
	got, err := actor.Ask(ctx, ref, Get{})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// Both members' CPU, which bounds the rate when cores are shared.
	if cpu := cpuTime() - cpu; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	if got.Count != b.N {
		b.Fatalf("counted %d, want %d", got.Count, b.N)
	}
}

func BenchmarkRemoteAsk(b *testing.B) {
	systems := benchCluster(b)
	key := benchKey(b, systems[0].Addr(), systems[1].Addr(), systems)
	ref := ccounter.Ref(systems[0], key)
	ctx := systemtest.Ctx(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := actor.Ask(ctx, ref, Get{}); err != nil {
			b.Fatal(err)
		}
	}
}
