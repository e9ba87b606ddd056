package runtime

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/host"
)

// A kind counts its own activations, which add up to the host's count,
// and an activation stops counting once it has passivated.
func TestActivationsCountEachKindsKeysUntilTheyPassivate(t *testing.T) {
	ended := make(chan host.Event, 16)
	h := host.New(host.Settings{Observer: func(e host.Event) {
		if e.Kind == host.ActivationEnded && e.Type == "b" {
			ended <- e
		}
	}})
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
	// Sweeps a day apart passivate b's key once it is idle (its tell may
	// still be running at the first): the end is reported, then the key
	// leaves the table, just after, under the shard lock.
	now, day := time.Now(), 0
	await(t, 10*time.Second, func() error {
		day++
		kb.Sweep(now.Add(time.Duration(day) * 24 * time.Hour))
		select {
		case <-ended:
			return nil
		default:
			return fmt.Errorf("b's key did not passivate after %d sweeps a day apart; b counts %d activations", day, kb.Activations())
		}
	})
	await(t, 10*time.Second, func() error {
		if n := kb.Activations(); n != 0 {
			return fmt.Errorf("kind b still counts %d activations after its key passivated, want 0", n)
		}
		return nil
	})
}

// await polls check until it returns nil, for a count with no event of
// its own; it fails the test with check's last error after limit.
func await(t *testing.T, limit time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for err := check(); err != nil; err = check() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", limit, err)
		}
		runtime.Gosched()
	}
}
