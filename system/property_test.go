package system_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
	"pgregory.net/rapid"
)

// propOp is one step of a sender's script.
type propOp struct {
	Key    int
	Ask    bool
	Cancel int    // for asks: 0 waits for the reply, 1 is cancelled at once, n>1 times out after n µs
	Fail   string // "", "error", "panic" or "release" (the handler releases its activation)
	Yield  int    // how often the handler yields, to widen race windows
}

func (o propOp) String() string {
	return fmt.Sprintf("{k%d ask=%v cancel=%d fail=%q yield=%d}", o.Key, o.Ask, o.Cancel, o.Fail, o.Yield)
}

// PropMsg is a message of the property test: who sent it and when.
type PropMsg struct {
	actor.Reply[PropMsgs, string]
	Sender, Seq int
	Fail        string
	Yield       int
}

// PropMsgs is the message type of the property test's actor.
type PropMsgs interface{ propMsg() }

func (PropMsg) propMsg() {}

// propWorld is what the handler observed.
type propWorld struct {
	mu         sync.Mutex
	handled    map[string]int // message id -> times handled
	last       map[string]int // key/sender -> last seq handled
	violations []string
	inside     map[string]*atomic.Int32
	// Activations seen by the observer, and releases handled. (Events of
	// two activations of one key may reach the observer out of order, see
	// TestObserverSeesActivationsOfAKeyInOrder, so only counts are checked.)
	starts, ends map[string]int
	releaseEnds  int
	releases     int // releases that reached a handler, counted at the end
}

func (w *propWorld) violate(format string, args ...any) {
	w.mu.Lock()
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

func (w *propWorld) observe(e system.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e.Kind {
	case system.ActivationStarted:
		w.starts[e.Actor.Key]++
	case system.ActivationEnded:
		w.ends[e.Actor.Key]++
		if e.Reason == "released" {
			w.releaseEnds++
		}
	}
}

func msgID(sender, seq int) string { return strconv.Itoa(sender) + "." + strconv.Itoa(seq) }

// TestRuntimeInvariantsUnderRandomInterleavings drives a few keys from
// several senders with random tells, asks, cancellations and handler
// failures, and checks: per-sender order holds per key, every ask gets
// exactly one outcome that fits what happened, no message is handled
// twice, and a handler never runs concurrently with itself.
func TestRuntimeInvariantsUnderRandomInterleavings(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		keys := rapid.IntRange(1, 3).Draw(rt, "keys")
		opGen := rapid.Custom(func(rt *rapid.T) propOp {
			o := propOp{Key: rapid.IntRange(0, keys-1).Draw(rt, "key"), Ask: rapid.Bool().Draw(rt, "ask")}
			if o.Ask {
				o.Cancel = rapid.SampledFrom([]int{0, 0, 1, 2, 50, 300}).Draw(rt, "cancel")
			}
			o.Fail = rapid.SampledFrom([]string{"", "", "", "", "error", "panic", "release"}).Draw(rt, "fail")
			o.Yield = rapid.IntRange(0, 3).Draw(rt, "yield")
			return o
		})
		senders := rapid.IntRange(1, 4).Draw(rt, "senders")
		scripts := make([][]propOp, senders)
		for s := range scripts {
			scripts[s] = rapid.SliceOfN(opGen, 0, 20).Draw(rt, fmt.Sprintf("sender%d", s))
		}
		checkInterleaving(rt, keys, scripts)
	})
}

func checkInterleaving(rt *rapid.T, keys int, scripts [][]propOp) {
	w := &propWorld{handled: map[string]int{}, last: map[string]int{}, inside: map[string]*atomic.Int32{},
		starts: map[string]int{}, ends: map[string]int{}}
	for k := range keys {
		w.inside["k"+strconv.Itoa(k)] = new(atomic.Int32)
	}
	def := actor.Define("prop", func(c *actor.Context[int, PropMsgs], m PropMsgs) error {
		p := m.(PropMsg)
		in := w.inside[c.Key()]
		if in.Add(1) != 1 {
			w.violate("handler for %s ran concurrently with itself", c.Key())
		}
		defer in.Add(-1)
		id := msgID(p.Sender, p.Seq)
		w.mu.Lock()
		w.handled[id]++
		if n := w.handled[id]; n > 1 {
			w.violations = append(w.violations, fmt.Sprintf("message %s handled %d times", id, n))
		}
		order := c.Key() + "/" + strconv.Itoa(p.Sender)
		if prev, ok := w.last[order]; ok && p.Seq <= prev {
			w.violations = append(w.violations, fmt.Sprintf("%s: seq %d handled after %d", order, p.Seq, prev))
		}
		w.last[order] = p.Seq
		w.mu.Unlock()
		for range p.Yield {
			runtime.Gosched()
		}
		switch p.Fail {
		case "error":
			return errBroken
		case "panic":
			panic("boom " + id)
		case "release":
			c.Release()
		}
		return actor.Respond(c, p, id)
	}, actor.WithIdleTimeout(time.Millisecond)) // passivate often, racing with new messages
	sys, err := system.New(system.Config{
		Actors:     []actor.Definition{def},
		Observer:   w.observe,
		Linger:     time.Millisecond,
		BackoffMin: 20 * time.Microsecond, BackoffMax: 100 * time.Microsecond,
		AskTimeout: systemtest.Limit,
	})
	if err != nil {
		rt.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), systemtest.Limit)
		defer cancel()
		if err := sys.Close(ctx); err != nil {
			rt.Errorf("Close: %v", err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), systemtest.Limit)
	defer cancel()
	var tells atomic.Int64
	var answered sync.Map // id -> reply, for asks answered with a value
	startLine := make(chan struct{})
	var wg sync.WaitGroup
	for s, script := range scripts {
		wg.Go(func() {
			<-startLine
			for seq, o := range script {
				ref := def.Ref(sys, "k"+strconv.Itoa(o.Key))
				m := PropMsg{Sender: s, Seq: seq, Fail: o.Fail, Yield: o.Yield}
				id := msgID(s, seq)
				if !o.Ask {
					if err := ref.Tell(ctx, m); err != nil {
						w.violate("Tell %s: %v", id, err)
					}
					tells.Add(1)
					continue
				}
				actx, acancel := ctx, context.CancelFunc(func() {})
				switch {
				case o.Cancel == 1:
					actx, acancel = context.WithCancel(ctx)
					acancel()
				case o.Cancel > 1:
					actx, acancel = context.WithTimeout(ctx, time.Duration(o.Cancel)*time.Microsecond)
				}
				got, err := actor.Ask(actx, ref, m)
				acancel()
				checkAskOutcome(w, o, id, got, err)
				if err == nil {
					answered.Store(id, got)
				}
			}
		})
	}
	close(startLine)
	wg.Wait()

	// Every told message is handled exactly once; count them.
	deadline := time.Now().Add(systemtest.Limit)
	for {
		n := 0
		w.mu.Lock()
		for s, script := range scripts {
			for seq, o := range script {
				if !o.Ask && w.handled[msgID(s, seq)] > 0 {
					n++
				}
			}
		}
		w.mu.Unlock()
		if int64(n) == tells.Load() {
			break
		}
		if time.Now().After(deadline) {
			rt.Fatalf("only %d of %d told messages were handled", n, tells.Load())
		}
		time.Sleep(100 * time.Microsecond)
	}
	answered.Range(func(id, _ any) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.handled[id.(string)] != 1 {
			w.violations = append(w.violations, fmt.Sprintf("ask %s answered but handled %d times", id, w.handled[id.(string)]))
		}
		return true
	})
	// Every release that reached its handler ends its activation, just
	// after the handler returns. (No message starts any more: tells are all
	// handled and asks all returned; a cancelled ask is never started late.)
	w.mu.Lock()
	for s, script := range scripts {
		for seq, o := range script {
			if o.Fail == "release" && w.handled[msgID(s, seq)] > 0 {
				w.releases++
			}
		}
	}
	w.mu.Unlock()
	for deadline := time.Now().Add(systemtest.Limit); ; time.Sleep(100 * time.Microsecond) {
		w.mu.Lock()
		settled := w.releaseEnds == w.releases
		w.mu.Unlock()
		if settled || time.Now().After(deadline) {
			break
		}
	}
	if n := sys.Stats().AsksInFlight; n != 0 {
		rt.Errorf("Stats.AsksInFlight = %d after every ask returned", n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, n := range w.starts {
		if d := n - w.ends[k]; d != 0 && d != 1 {
			w.violations = append(w.violations, fmt.Sprintf("%s: %d activations started, %d ended", k, n, w.ends[k]))
		}
	}
	if w.releaseEnds != w.releases {
		w.violations = append(w.violations, fmt.Sprintf("%d activations ended as released, after %d releases", w.releaseEnds, w.releases))
	}
	if len(w.violations) > 0 {
		rt.Fatalf("%d violations, first: %v", len(w.violations), w.violations[:min(5, len(w.violations))])
	}
}

// checkAskOutcome checks that the one outcome an ask got fits the op.
func checkAskOutcome(w *propWorld, o propOp, id, got string, err error) {
	var ctxErr = errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	switch {
	case err == nil:
		if got != id {
			w.violate("ask %s answered %q: a reply crossed to the wrong asker", id, got)
		}
		if o.Fail == "error" || o.Fail == "panic" {
			w.violate("ask %s of a failing handler (%s) answered %q", id, o.Fail, got)
		}
	case errors.Is(err, actor.ErrActorFailed):
		var pe *actor.PanicError
		if o.Fail == "" || o.Fail == "release" || o.Fail == "error" && !errors.Is(err, errBroken) || o.Fail == "panic" && !errors.As(err, &pe) {
			w.violate("ask %s (fail %q) got %v", id, o.Fail, err)
		}
		if got != "" {
			w.violate("ask %s got both a value %q and an error", id, got)
		}
	case ctxErr && o.Cancel != 0:
		if got != "" {
			w.violate("ask %s got both a value %q and an error", id, got)
		}
	default:
		w.violate("ask %s (%v) got unexpected error %v", id, o, err)
	}
}
