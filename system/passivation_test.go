package system_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// TestPassivationRacingWithSendsLosesNothing sends to keys that idle out
// and release themselves all the time, and checks that no message is lost
// or reordered, and that each key's activations start and end in turn.
func TestPassivationRacingWithSendsLosesNothing(t *testing.T) {
	const senders, perSender, keys = 4, 400, 3
	var mu sync.Mutex
	last := map[string]int{}
	active := map[string]bool{}
	var problems []string
	var handled, ended, idled atomic.Int64
	problem := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	observe := func(e system.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case system.ActivationStarted:
			if active[e.Actor.Key] {
				problem("%v started twice without ending", e.Actor)
			}
			active[e.Actor.Key] = true
		case system.ActivationEnded:
			if !active[e.Actor.Key] {
				problem("%v ended (%s) without having started", e.Actor, e.Reason)
			}
			active[e.Actor.Key] = false
			ended.Add(1)
			if e.Reason == "idle" {
				idled.Add(1)
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
		}
		handled.Add(1)
		return nil
	}, actor.WithIdleTimeout(time.Microsecond))
	sys := newSystem(t, system.Config{Observer: observe, Linger: 100 * time.Microsecond}, def)
	ctx := ctxT(t)
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
	waitUntil(t, "every message is handled", func() bool { return handled.Load() == senders*perSender })
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %v", len(problems), problems[:min(5, len(problems))])
	}
	if ended.Load() == 0 {
		t.Errorf("no activation ended: the test did not exercise passivation")
	}
	t.Logf("%d activations ended, %d idle", ended.Load(), idled.Load())
}
