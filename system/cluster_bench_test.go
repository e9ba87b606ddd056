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

// BenchmarkRemoteAsk asks with one context, shared by every ask, that
// ends with the benchmark.
func BenchmarkRemoteAsk(b *testing.B) {
	ctx := systemtest.Ctx(b)
	benchRemoteAsk(b, func() (context.Context, context.CancelFunc) { return ctx, func() {} })
}

// BenchmarkRemoteAskBackground asks with a context that cannot end (the
// two-process benchmark's default).
func BenchmarkRemoteAskBackground(b *testing.B) {
	benchRemoteAsk(b, func() (context.Context, context.CancelFunc) { return context.Background(), func() {} })
}

// BenchmarkRemoteAskTimeout gives each ask its own context.WithTimeout,
// as real callers do.
func BenchmarkRemoteAskTimeout(b *testing.B) {
	benchRemoteAsk(b, func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Minute)
	})
}

// benchRemoteAsk makes b.N sequential asks from one member to a key the
// other owns, each with the context newCtx returns.
func benchRemoteAsk(b *testing.B, newCtx func() (context.Context, context.CancelFunc)) {
	systems := benchCluster(b)
	key := benchKey(b, systems[0].Addr(), systems[1].Addr(), systems)
	ref := ccounter.Ref(systems[0], key)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx, cancel := newCtx()
		_, err := actor.Ask(ctx, ref, Get{})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalAskInACluster asks a key on the asking member itself:
// no network, but the message and the reply (a struct with a string, so
// encoded) are measured against the message limit.
func BenchmarkLocalAskInACluster(b *testing.B) {
	systems := benchCluster(b)
	ref := ccounter.Ref(systems[0], keyPlacedOn(b, systems[0], systems[0], "ccounter", "local-"))
	ctx := systemtest.Ctx(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := actor.Ask(ctx, ref, Get{}); err != nil {
			b.Fatal(err)
		}
	}
}
