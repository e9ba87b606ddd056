package actor_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// Benchmark actors. sink counts what it receives and signals when it has
// seen the expected number; echo answers asks; ball bounces between pairs.

type sinkMsg interface{ sinkMsg() }

type hit struct{}
type expect struct {
	actor.Reply[sinkMsg, struct{}]
	N int
}

func (hit) sinkMsg()    {}
func (expect) sinkMsg() {}

type sinkState struct {
	seen, want int
	done       actor.Deferred[struct{}]
}

var benchSink = actor.Define("bench-sink", func(c *actor.Context[*sinkState, sinkMsg], m sinkMsg) error {
	s := c.State()
	if s == nil {
		s = &sinkState{}
		c.SetState(s)
	}
	switch m := m.(type) {
	case hit:
		s.seen++
		if s.want > 0 && s.seen == s.want {
			s.done.Resolve(struct{}{})
		}
	case expect:
		s.want = m.N
		s.done = actor.Defer(c, m)
		if s.seen >= s.want {
			s.done.Resolve(struct{}{})
		}
	}
	return nil
}, actor.WithMailbox(1<<16, actor.Wait))

type echoMsg interface{ echoMsg() }
type ping struct {
	actor.Reply[echoMsg, int]
	N int
}

func (ping) echoMsg() {}

var benchEcho = actor.Define("bench-echo", func(c *actor.Context[struct{}, echoMsg], m echoMsg) error {
	p := m.(ping)
	return actor.Respond(c, p, p.N)
})

type ballMsg interface{ ballMsg() }
type ball struct {
	From actor.Ref[ballMsg]
	Left int
	Done chan struct{}
}

func (ball) ballMsg() {}

var benchBall = actor.Define("bench-ball", func(c *actor.Context[struct{}, ballMsg], m ballMsg) error {
	b := m.(ball)
	if b.Left == 0 {
		close(b.Done)
		return nil
	}
	from := b.From
	b.From, b.Left = c.Self(), b.Left-1
	return from.Tell(c, b)
})

// bench-gate holds its goroutine in the handler of a hold until the hold's
// gate opens, so tells meanwhile measure the sender alone.
type gateMsg interface{ gateMsg() }
type hold struct {
	Gate <-chan struct{}
	N    int // tells to count before closing Done
	Done chan struct{}
}
type tick struct{}

func (hold) gateMsg() {}
func (tick) gateMsg() {}

type gateState struct {
	n, want int
	done    chan struct{}
}

var benchGate = actor.Define("bench-gate", func(c *actor.Context[gateState, gateMsg], m gateMsg) error {
	s := c.State()
	switch m := m.(type) {
	case hold:
		s.want, s.done = m.N, m.Done
		<-m.Gate
	case tick:
		if s.n++; s.n == s.want {
			close(s.done)
		}
	}
	c.SetState(s)
	return nil
}, actor.WithMailbox(math.MaxInt32, actor.Wait))

type idleMsg interface{ idleMsg() }
type touch struct{}

func (touch) idleMsg() {}

// idleTouched counts the touches bench-idle handled (benchmarks run one
// at a time, so a package variable is enough).
var idleTouched atomic.Int64

var benchIdle = actor.Define("bench-idle", func(c *actor.Context[struct{}, idleMsg], m idleMsg) error {
	idleTouched.Add(1)
	return nil
}, actor.WithIdleTimeout(time.Hour))

func newBenchSystem(b *testing.B) *system.System {
	b.Helper()
	return newBenchSystemWith(b, system.Config{})
}

// newBenchSystemWith is newBenchSystem with cfg (its Actors replaced).
func newBenchSystemWith(b *testing.B, cfg system.Config) *system.System {
	b.Helper()
	cfg.Actors = []actor.Definition{benchSink, benchEcho, benchBall, benchIdle, benchGate}
	sys, err := system.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := sys.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return sys
}

func waitSeen(b *testing.B, ctx context.Context, ref actor.Ref[sinkMsg], n int) {
	if _, err := actor.Ask(ctx, ref, expect{N: n}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTell: one sender, one actor.
func BenchmarkTell(b *testing.B) { benchTell(b, newBenchSystem(b)) }

// BenchmarkTellMetrics is BenchmarkTell in a system with metrics
// (system.Config.Metrics): what counting each tell costs.
func BenchmarkTellMetrics(b *testing.B) {
	benchTell(b, newBenchSystemWith(b, system.Config{Metrics: prometheus.NewRegistry()}))
}

func benchTell(b *testing.B, sys *system.System) {
	ctx := context.Background()
	ref := benchSink.Ref(sys, "one")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := ref.Tell(ctx, hit{}); err != nil {
			b.Fatal(err)
		}
	}
	waitSeen(b, ctx, ref, b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkTellSender: one sender, one actor whose goroutine is busy
// (held in a handler) meanwhile: the sender's cost alone, mailbox growth
// included.
func BenchmarkTellSender(b *testing.B) {
	sys := newBenchSystem(b)
	ctx := context.Background()
	ref := benchGate.Ref(sys, "gate")
	gate, done := make(chan struct{}), make(chan struct{})
	if err := ref.Tell(ctx, hold{Gate: gate, N: b.N, Done: done}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := ref.Tell(ctx, tick{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(gate)
	<-done
}

// BenchmarkTellMany: 4 senders, 64 actors.
func BenchmarkTellMany(b *testing.B) {
	sys := newBenchSystem(b)
	ctx := context.Background()
	const senders, keys = 4, 64
	refs := make([]actor.Ref[sinkMsg], keys)
	for i := range refs {
		refs[i] = benchSink.Ref(sys, fmt.Sprint("many-", i))
	}
	per := b.N/senders + 1
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if err := refs[(s*7+i)%keys].Tell(ctx, hit{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := per * senders
	counts := make([]int, keys)
	for s := range senders {
		for i := range per {
			counts[(s*7+i)%keys]++
		}
	}
	for i, r := range refs {
		waitSeen(b, ctx, r, counts[i])
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkAsk: sequential asks from outside the system.
func BenchmarkAsk(b *testing.B) { benchAsk(b, newBenchSystem(b)) }

// BenchmarkAskMetrics is BenchmarkAsk in a system with metrics
// (system.Config.Metrics): what counting and timing each ask costs.
func BenchmarkAskMetrics(b *testing.B) {
	benchAsk(b, newBenchSystemWith(b, system.Config{Metrics: prometheus.NewRegistry()}))
}

func benchAsk(b *testing.B, sys *system.System) {
	ctx := context.Background()
	ref := benchEcho.Ref(sys, "echo")
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		n, err := actor.Ask(ctx, ref, ping{N: i})
		lat = append(lat, time.Since(t0))
		if err != nil || n != i {
			b.Fatal(n, err)
		}
	}
	b.StopTimer()
	reportQuantiles(b, lat)
}

// BenchmarkPingPong: 4 pairs, one message in flight each.
func BenchmarkPingPong(b *testing.B) {
	sys := newBenchSystem(b)
	ctx := context.Background()
	const pairs = 4
	per := b.N/pairs + 1
	done := make([]chan struct{}, pairs)
	b.ReportAllocs()
	b.ResetTimer()
	for p := range pairs {
		done[p] = make(chan struct{})
		a := benchBall.Ref(sys, fmt.Sprint("a", p))
		z := benchBall.Ref(sys, fmt.Sprint("z", p))
		if err := z.Tell(ctx, ball{From: a, Left: per, Done: done[p]}); err != nil {
			b.Fatal(err)
		}
	}
	for _, d := range done {
		<-d
	}
	b.ReportMetric(float64(per*pairs)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkActivate activates b.N keys with one message each and reports
// the heap each idle activation keeps.
func BenchmarkActivate(b *testing.B) {
	sys := newBenchSystem(b)
	ctx := context.Background()
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	idleTouched.Store(0)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := benchIdle.Ref(sys, keys[i]).Tell(ctx, touch{}); err != nil {
			b.Fatal(err)
		}
	}
	for idleTouched.Load() < int64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	time.Sleep(50 * time.Millisecond) // goroutines linger out
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keys)
	// The keys' own bytes are the caller's; what remains is the runtime's.
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heapB/actor")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "activations/s")
}

func reportQuantiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slicesSort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

func slicesSort(d []time.Duration) { slices.Sort(d) }
