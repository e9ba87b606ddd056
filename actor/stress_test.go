package actor_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/system"
)

// seqMsg is a tell numbered per sender and key.
type seqMsg struct {
	Sender, Seq int
	Release     bool
}

func (seqMsg) probeMsg() {}

// TestManySendersKeepTheirOrderThroughPassivation tells a few keys from
// many goroutines at once, through the busy-cell fast path and the
// mailbox bound, while the keys idle out and release themselves: every
// tell must be handled exactly once, in its sender's order.
func TestManySendersKeepTheirOrderThroughPassivation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []actor.Option
	}{
		{"unbounded", []actor.Option{actor.WithMailbox(1<<30, actor.Wait)}},
		{"bound 64", []actor.Option{actor.WithMailbox(64, actor.Wait)}},
		{"bound 3", []actor.Option{actor.WithMailbox(3, actor.Wait)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const senders, perSender, keys = 8, 3000, 3
			var mu sync.Mutex
			next := map[string]int{} // key/sender -> next seq wanted
			var problems []string
			var handled atomic.Int64
			def := actor.Define("stress", func(c *actor.Context[int, ProbeMsg], m ProbeMsg) error {
				n := m.(seqMsg)
				id := fmt.Sprintf("%s/%d", c.Key(), n.Sender)
				mu.Lock()
				if n.Seq != next[id] && len(problems) < 10 {
					problems = append(problems, fmt.Sprintf("%s: got %d, want %d", id, n.Seq, next[id]))
				}
				next[id] = n.Seq + 1
				mu.Unlock()
				if n.Release {
					c.Release()
				}
				handled.Add(1)
				return nil
			}, append(tc.opts, actor.WithIdleTimeout(time.Microsecond))...)
			var ended atomic.Int64
			observe := func(e system.Event) {
				if e.Kind == system.ActivationEnded {
					ended.Add(1)
				}
			}
			sys := newSystem(t, system.Config{Observer: observe, Linger: 100 * time.Microsecond}, def)
			ctx := ctxT(t)
			var wg sync.WaitGroup
			for s := range senders {
				wg.Go(func() {
					refs := make([]actor.Ref[ProbeMsg], keys)
					for i := range refs {
						refs[i] = def.Ref(sys, fmt.Sprint("k", i))
					}
					seq := make([]int, keys)
					for i := range perSender {
						k := (i / (16 + s)) % keys // runs of tells to one key
						m := seqMsg{Sender: s, Seq: seq[k], Release: i%97 == 0}
						if err := refs[k].Tell(ctx, m); err != nil {
							t.Error(err)
							return
						}
						seq[k]++
					}
				})
			}
			wg.Wait()
			waitUntil(t, "every tell is handled", func() bool { return handled.Load() >= senders*perSender })
			mu.Lock()
			defer mu.Unlock()
			if len(problems) > 0 {
				t.Fatalf("order broken: %v", problems)
			}
			if got := handled.Load(); got != senders*perSender {
				t.Fatalf("handled %d tells, sent %d", got, senders*perSender)
			}
			if ended.Load() == 0 {
				t.Errorf("no activation ended: passivation did not race the tells")
			}
		})
	}
}

// TestRefuseBoundIsExactWhileTheHandlerRuns fills a Refuse mailbox behind
// a running handler, most of it through the busy-cell fast path: exactly
// the bound's worth of tells gets in, the next is refused.
func TestRefuseBoundIsExactWhileTheHandlerRuns(t *testing.T) {
	const bound = 100
	g, l := newGate(), &opLog{}
	def := gatedProbe("exact", g, l, actor.WithMailbox(bound, actor.Refuse))
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	ref := def.Ref(sys, "k")
	if err := ref.Tell(ctx, Note{Op: "block"}); err != nil {
		t.Fatal(err)
	}
	recv(t, g.entered, "the handler to block")
	for i := range bound {
		if err := ref.Tell(ctx, Note{Op: fmt.Sprint(i)}); err != nil {
			close(g.open)
			t.Fatalf("tell %d of %d into a mailbox with room: %v", i+1, bound, err)
		}
	}
	err := ref.Tell(context.Background(), Note{Op: "overflow"})
	close(g.open)
	mustIs(t, err, actor.ErrMailboxFull)
	waitUntil(t, "the mailbox to drain", func() bool { return len(l.get()) >= bound+1 })
	if _, err := actor.Ask(ctx, ref, Do{Op: "last"}); err != nil {
		t.Fatal(err)
	}
	if got := l.get(); len(got) != bound+2 || got[bound] != fmt.Sprint(bound-1) {
		t.Errorf("handled %d messages (%v ...), want %d ending with %d, last", len(got), got[:min(3, len(got))], bound+2, bound-1)
	}
}
