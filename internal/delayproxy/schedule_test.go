package delayproxy

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScheduleAddsTheDelayToAnIdleLink(t *testing.T) {
	sc := schedule{link: &link{}, rng: rand.New(rand.NewPCG(0, 0))}
	if got := sc.due(epoch, 100, Shape{Delay: 25 * time.Millisecond}); got != epoch.Add(25*time.Millisecond) {
		t.Fatalf("due = %v after epoch, want 25ms", got.Sub(epoch))
	}
}

func TestScheduleSpacesChunksAtTheBandwidth(t *testing.T) {
	sc := schedule{link: &link{}, rng: rand.New(rand.NewPCG(0, 0))}
	s := Shape{Bandwidth: 1 << 20, Delay: 10 * time.Millisecond} // 1 MiB/s
	first := sc.due(epoch, 1<<10, s)
	second := sc.due(epoch, 1<<10, s) // read at the same instant
	if gap := second.Sub(first); gap < 976*time.Microsecond || gap > 977*time.Microsecond {
		t.Fatalf("gap between two 1 KiB chunks at 1 MiB/s = %v, want ~976.6µs", gap)
	}
}

func TestScheduleLinkIsSharedAcrossConnections(t *testing.T) {
	l := &link{}
	a := schedule{link: l, rng: rand.New(rand.NewPCG(0, 1))}
	b := schedule{link: l, rng: rand.New(rand.NewPCG(0, 2))}
	s := Shape{Bandwidth: 1000}
	_ = a.due(epoch, 1000, s) // occupies the link for one second
	if got := b.due(epoch, 1, s); got.Sub(epoch) < time.Second {
		t.Fatalf("second connection's byte due %v after epoch, want after the first's second on the link", got.Sub(epoch))
	}
}

// Whatever the reads, delivery times never decrease, are never earlier than
// read time + delay, and the same seed gives the same schedule.
func TestScheduleIsMonotonicAndReproducible(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		s := Shape{
			Delay:     time.Duration(rapid.Int64Range(0, int64(50*time.Millisecond)).Draw(rt, "delay")),
			Jitter:    time.Duration(rapid.Int64Range(0, int64(20*time.Millisecond)).Draw(rt, "jitter")),
			Bandwidth: rapid.Int64Range(0, 1<<30).Draw(rt, "bandwidth"),
		}
		gaps := rapid.SliceOfN(rapid.Int64Range(0, int64(5*time.Millisecond)), 1, 50).Draw(rt, "gaps")
		sizes := rapid.SliceOfN(rapid.IntRange(0, chunkSize), len(gaps), len(gaps)).Draw(rt, "sizes")
		run := func() []time.Time {
			sc := schedule{link: &link{}, rng: rand.New(rand.NewPCG(seed, 0))}
			now := epoch
			var out []time.Time
			for i, g := range gaps {
				now = now.Add(time.Duration(g))
				at := sc.due(now, sizes[i], s)
				if at.Before(now.Add(s.Delay)) {
					rt.Fatalf("chunk %d due %v before read time + delay", i, now.Add(s.Delay).Sub(at))
				}
				if len(out) > 0 && at.Before(out[len(out)-1]) {
					rt.Fatalf("chunk %d due before chunk %d: reordered", i, i-1)
				}
				out = append(out, at)
			}
			return out
		}
		if a, b := run(), run(); !slices.Equal(a, b) {
			rt.Fatalf("two runs with seed %d gave different schedules", seed)
		}
	})
}
