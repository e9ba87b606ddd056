package system_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// TestPassivationRacingWithSendsLosesNothing sends to keys that idle out
// and release themselves all the time, and checks that no message is lost
// or reordered, that each release ends exactly one activation and that
// every activation but the current one has ended.
func TestPassivationRacingWithSendsLosesNothing(t *testing.T) {
	const senders, perSender, keys = 4, 400, 3
	var mu sync.Mutex
	last := map[string]int{}
	var problems []string
	var handled, ended, idled atomic.Int64
	problem := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	starts, ends := map[string]int{}, map[string]int{}
	var releaseEnds, releases int
	observe := func(e system.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case system.ActivationStarted:
			starts[e.Actor.Key]++
		case system.ActivationEnded:
			ends[e.Actor.Key]++
			ended.Add(1)
			switch e.Reason {
			case "idle":
				idled.Add(1)
			case "released":
				releaseEnds++
			}
		}
	}
	def := actor.Define("flicker", func(c *actor.Context[int, Msg], m Msg) error {
		n := m.(Note)
		id := fmt.Sprintf("%s/%d", c.Key(), n.Sender)
		mu.Lock()
		if prev, ok := last[id]; ok && n.Seq != prev+1 || !ok && n.Seq != 0 {
			problem("%s: %d after %d", id, n.Seq, prev)
		}
		last[id] = n.Seq
		mu.Unlock()
		if n.Op == "release" {
			c.Release()
			mu.Lock()
			releases++
			mu.Unlock()
		}
		handled.Add(1)
		return nil
	}, actor.WithIdleTimeout(time.Microsecond))
	sys := systemtest.NewSystem(t, system.Config{Observer: observe, Linger: 100 * time.Microsecond}, def)
	ctx := systemtest.Ctx(t)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			seq := map[string]int{}
			for i := range perSender {
				key := fmt.Sprint((i / 3 * (s + 1)) % keys)
				op := ""
				if i%5 == 0 {
					op = "release"
				}
				if err := def.Ref(sys, key).Tell(ctx, Note{Op: op, Sender: s, Seq: seq[key]}); err != nil {
					t.Error(err)
					return
				}
				seq[key]++
				if i%17 == 0 {
					time.Sleep(200 * time.Microsecond) // let keys idle out between bursts
				}
			}
		})
	}
	wg.Wait()
	systemtest.WaitUntil(t, "every message is handled", func() bool { return handled.Load() == senders*perSender })
	systemtest.WaitUntil(t, "every release ends its activation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if releaseEnds > releases {
			problem("%d activations ended as released after %d releases", releaseEnds, releases)
			return true
		}
		return releaseEnds == releases
	})
	mu.Lock()
	defer mu.Unlock()
	// (Events of two activations of one key may reach the observer out of
	// order, see TestObserverSeesActivationsOfAKeyInOrder: count them.)
	for k, n := range starts {
		if d := n - ends[k]; d != 0 && d != 1 {
			problem("%s: %d activations started, %d ended", k, n, ends[k])
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %v", len(problems), problems[:min(5, len(problems))])
	}
	if ended.Load() == 0 {
		t.Errorf("no activation ended: the test did not exercise passivation")
	}
	t.Logf("%d activations ended, %d idle", ended.Load(), idled.Load())
}

// TestObserverSeesActivationsOfAKeyInOrder wants the observer to see a
// key's ActivationEnded before the ActivationStarted of its next
// activation, even when the observer is slow (it logs, say).
func TestObserverSeesActivationsOfAKeyInOrder(t *testing.T) {
	var mu sync.Mutex
	active := map[string]bool{}
	var problems []string
	observe := func(e system.Event) {
		if e.Kind == system.ActivationEnded {
			time.Sleep(50 * time.Microsecond) // a slow observer widens the window
		}
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case system.ActivationStarted:
			if active[e.Actor.Key] {
				problems = append(problems, fmt.Sprintf("%v started twice without ending", e.Actor))
			}
			active[e.Actor.Key] = true
		case system.ActivationEnded:
			if !active[e.Actor.Key] {
				problems = append(problems, fmt.Sprintf("%v ended (%s) without having started", e.Actor, e.Reason))
			}
			active[e.Actor.Key] = false
		}
	}
	def := probe("flicker", nil, nil, actor.WithIdleTimeout(time.Microsecond))
	sys := systemtest.NewSystem(t, system.Config{Observer: observe, Linger: 100 * time.Microsecond}, def)
	ctx := systemtest.Ctx(t)
	for i := range 3000 {
		if err := def.Ref(sys, "k").Tell(ctx, Note{}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			time.Sleep(150 * time.Microsecond) // let the key idle out
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("%d events out of order, first: %v", len(problems), problems[:min(4, len(problems))])
	}
}
