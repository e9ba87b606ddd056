package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/host"
)

// A kind counts its own activations, which add up to the host's count,
// and an activation stops counting once it has passivated.
func TestActivationsCountEachKindsKeysUntilTheyPassivate(t *testing.T) {
	h := host.New(host.Settings{})
	t.Cleanup(func() { h.Close(context.Background()) })
	a := Define("a", func(c *tctx[int, int], m int) error { c.SetState(m); return nil })
	b := Define("b", func(c *tctx[int, int], m int) error { c.SetState(m); return nil })
	ka := a.Instantiate(h).(*kind[int, int, tctx[int, int]])
	kb := b.Instantiate(h).(*kind[int, int, tctx[int, int]])
	for i := range 300 { // more than the shards: keys spread over all of them
		key := fmt.Sprint("k", i)
		if err := ka.tell(context.Background(), key, ka.hash(key), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := kb.tell(context.Background(), "x", kb.hash("x"), 1); err != nil {
		t.Fatal(err)
	}
	if got := ka.Activations(); got != 300 {
		t.Errorf("kind a counts %d activations, want 300", got)
	}
	if got := kb.Activations(); got != 1 {
		t.Errorf("kind b counts %d activations, want 1", got)
	}
	if sum, all := ka.Activations()+kb.Activations(), h.Active.Load(); int64(sum) != all {
		t.Errorf("the kinds count %d activations, the host %d: want equal", sum, all)
	}
	// Sweeps a day apart passivate b's key once it is idle.
	now := time.Now()
	for day, deadline := 1, now.Add(10*time.Second); kb.Activations() != 0; day++ {
		if time.Now().After(deadline) {
			t.Fatalf("kind b still counts %d activations after sweeps a day ahead, want 0", kb.Activations())
		}
		kb.Sweep(now.Add(time.Duration(day) * 24 * time.Hour))
		time.Sleep(time.Millisecond) // polls for the goroutine's exit, which has no event
	}
	var _ host.ActivationCounter = ka
}
