package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/host"
)

// A negative idle timeout (actor.Never) keeps an idle activation through
// any number of sweeps; a positive one passivates it.
func TestNeverIdleActivationsSurviveSweeps(t *testing.T) {
	for _, c := range []struct {
		idle time.Duration
		kept bool
	}{{-1, true}, {time.Minute, false}} {
		h := host.New(host.Settings{})
		t.Cleanup(func() { h.Close(context.Background()) })
		def := Define("idle", func(c *tctx[int, int], m int) error { c.SetState(m); return nil })
		def.spec.Idle = c.idle
		k := def.Instantiate(h).(*kind[int, int, tctx[int, int]])
		if err := k.tell(context.Background(), "k", k.hash("k"), 7); err != nil {
			t.Fatal(err)
		}
		cl := k.cellAt(k.hash("k"), "k", false)
		idle := func() bool {
			cl.mu.Lock()
			defer cl.mu.Unlock()
			return cl.started && cl.state == 7 && !cl.running
		}
		for deadline := time.Now().Add(10 * time.Second); !idle(); {
			if time.Now().After(deadline) {
				t.Fatal("the activation never went idle")
			}
			time.Sleep(time.Millisecond) // polls for the goroutine's exit, which has no event
		}
		now := time.Now()
		for i := range 3 {
			k.Sweep(now.Add(time.Duration(i+1) * 24 * time.Hour))
		}
		cl.mu.Lock()
		kept := cl.started && !cl.gone
		cl.mu.Unlock()
		if kept != c.kept {
			t.Errorf("idle timeout %v: activation kept = %v after a day idle, want %v", c.idle, kept, c.kept)
		}
	}
}
