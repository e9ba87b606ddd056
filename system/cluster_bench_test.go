package system_test

import (
	"context"
	"testing"
	"time"

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

// BenchmarkRemoteAskBackground asks with a context that cannot end (the
// two-process benchmark's default).
func BenchmarkRemoteAskBackground(b *testing.B) {
	systems := benchCluster(b)
	key := benchKey(b, systems[0].Addr(), systems[1].Addr(), systems)
	ref := ccounter.Ref(systems[0], key)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := actor.Ask(context.Background(), ref, Get{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRemoteAskTimeout gives each ask its own context.WithTimeout,
// as real callers do.
func BenchmarkRemoteAskTimeout(b *testing.B) {
	systems := benchCluster(b)
	key := benchKey(b, systems[0].Addr(), systems[1].Addr(), systems)
	ref := ccounter.Ref(systems[0], key)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := actor.Ask(ctx, ref, Get{})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
}
