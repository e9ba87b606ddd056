package replicanode

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The backoff is random below a bound that doubles per attempt, from one
// tick period to 64.
func TestAcquireBackoffIsRandomBelowADoublingBound(t *testing.T) {
	const tick = 50 * time.Millisecond
	rnd := rand.New(rand.NewPCG(1, 2))
	for attempt, bound := range map[int]time.Duration{0: tick, 1: tick, 2: 2 * tick, 3: 4 * tick, 7: 64 * tick, 100: 64 * tick} {
		seen := map[time.Duration]bool{}
		var most time.Duration
		for range 1000 {
			d := backoff(tick, attempt, rnd.Int64N)
			if d <= 0 || d > bound {
				t.Fatalf("attempt %d waits %v, want within (0, %v]", attempt, d, bound)
			}
			seen[d] = true
			most = max(most, d)
		}
		if len(seen) < 100 || most < bound/2 {
			t.Fatalf("attempt %d: %d distinct waits up to %v, want them spread below %v", attempt, len(seen), most, bound)
		}
	}
}
