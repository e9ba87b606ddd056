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

// Tests of the direct hand-off (handoff.go): a tell from a handler to an
// idle actor may run that actor on the teller's goroutine once the
// teller's handler returns.

type relayMsg interface{ relayMsg() }

// volley bounces between two relays until Left reaches zero; every relay
// checks that it sees its volleys in order and never runs two handlers at
// once.
type volley struct {
	Peer actor.Ref[relayMsg]
	Seq  int
	Left int
	Done chan struct{}
}

func (volley) relayMsg() {}

type relayState struct{ last int }

type relayCheck struct {
	mu      sync.Mutex
	running map[string]bool
	errs    []string
}

func (rc *relayCheck) enter(key string) {
	rc.mu.Lock()
	if rc.running[key] {
		rc.errs = append(rc.errs, key+": two handlers at once")
	}
	rc.running[key] = true
	rc.mu.Unlock()
}

func (rc *relayCheck) leave(key string) {
	rc.mu.Lock()
	rc.running[key] = false
	rc.mu.Unlock()
}

func (rc *relayCheck) fail(format string, a ...any) {
	rc.mu.Lock()
	rc.errs = append(rc.errs, fmt.Sprintf(format, a...))
	rc.mu.Unlock()
}

func relayDef(name string, rc *relayCheck) *actor.Def[relayState, relayMsg] {
	return actor.Define(name, func(c *actor.Context[relayState, relayMsg], m relayMsg) error {
		rc.enter(c.Key())
		defer rc.leave(c.Key())
		v := m.(volley)
		if v.Seq <= c.State().last {
			rc.fail("%s: volley %d after %d", c.Key(), v.Seq, c.State().last)
		}
		c.SetState(relayState{last: v.Seq})
		if v.Left == 0 {
			close(v.Done)
			return nil
		}
		peer := v.Peer
		v.Peer, v.Seq, v.Left = c.Self(), v.Seq+1, v.Left-1
		return peer.Tell(c, v)
	})
}

// TestHandoffPingPong bounces volleys between pairs of actors, which hand
// off to each other: order and one handler at a time per key hold, and
// every volley arrives.
func TestHandoffPingPong(t *testing.T) {
	rc := &relayCheck{running: map[string]bool{}}
	def := relayDef("relay", rc)
	sys := newSystem(t, system.Config{}, def)
	ctx := ctxT(t)
	const pairs, n = 4, 2000
	var dones []chan struct{}
	for p := range pairs {
		done := make(chan struct{})
		dones = append(dones, done)
		a := def.Ref(sys, fmt.Sprint("a", p))
		b := def.Ref(sys, fmt.Sprint("b", p))
		if err := b.Tell(ctx, volley{Peer: a, Seq: 1, Left: n, Done: done}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dones {
		recv(t, d, "volleys")
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, e := range rc.errs {
		t.Error(e)
	}
}

type waitMsg interface{ waitMsg() }

type tellAndWait struct {
	To   actor.Ref[waitMsg]
	Seen chan struct{}
}
type signal struct{ Seen chan struct{} }

func (tellAndWait) waitMsg() {}
func (signal) waitMsg()      {}

// TestHandoffBlockedTeller: a handler that tells an idle actor and then
// blocks until that actor has handled the tell must not deadlock: the
// stashed actor gets a goroutine of its own within a few linger ticks.
func TestHandoffBlockedTeller(t *testing.T) {
	def := actor.Define("waiter", func(c *actor.Context[struct{}, waitMsg], m waitMsg) error {
		switch m := m.(type) {
		case tellAndWait:
			if err := m.To.Tell(c, signal{Seen: m.Seen}); err != nil {
				return err
			}
			<-m.Seen // blocks the teller until the idle actor ran
		case signal:
			close(m.Seen)
		}
		return nil
	})
	sys := newSystem(t, system.Config{Linger: 5 * time.Millisecond}, def)
	ctx := ctxT(t)
	// One teller throughout: only a warm actor's goroutine hands off (a
	// cold one, just activated, runs alone), so the first round or two
	// may not stash.
	from := def.Ref(sys, "from")
	for i := range 20 {
		seen := make(chan struct{})
		to := def.Ref(sys, fmt.Sprint("to", i))
		if err := from.Tell(ctx, tellAndWait{To: to, Seen: seen}); err != nil {
			t.Fatal(err)
		}
		recv(t, seen, "the told actor")
	}
}

// TestHandoffOtherSystem: a tell from a handler to an actor of another
// system never runs it on the teller's goroutine, so each system's Close
// waits for its own goroutines (goleak checks none is left).
func TestHandoffOtherSystem(t *testing.T) {
	var handled atomic.Int64
	sink := actor.Define("handoff-sink", func(c *actor.Context[struct{}, waitMsg], m waitMsg) error {
		handled.Add(1)
		return nil
	})
	other := newSystem(t, system.Config{}, sink)
	src := actor.Define("handoff-src", func(c *actor.Context[struct{}, waitMsg], m waitMsg) error {
		return sink.Ref(other, c.Key()).Tell(c, signal{})
	})
	sys := newSystem(t, system.Config{}, src)
	ctx := ctxT(t)
	const n = 50
	for i := range n {
		if err := src.Ref(sys, fmt.Sprint("k", i)).Tell(ctx, signal{}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "all handled", func() bool { return handled.Load() == n })
	cctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := other.Close(cctx); err != nil {
		t.Fatal(err)
	}
}

type askMsg interface{ askMsg() }

type tellThenAsk struct {
	To  actor.Ref[askMsg]
	Got chan int
}
type poke struct{}
type count struct{ actor.Reply[askMsg, int] }

func (tellThenAsk) askMsg() {}
func (poke) askMsg()        {}
func (count) askMsg()       {}

// TestHandoffTellThenAsk: a handler that tells an idle actor and then asks
// it gets the answer at once, not after the linger clock's rescue (the
// clock ticks once an hour here).
func TestHandoffTellThenAsk(t *testing.T) {
	def := actor.Define("asker", func(c *actor.Context[int, askMsg], m askMsg) error {
		switch m := m.(type) {
		case tellThenAsk:
			if err := m.To.Tell(c, poke{}); err != nil {
				return err
			}
			n, err := actor.Ask(c, m.To, count{})
			if err != nil {
				return err
			}
			m.Got <- n
		case poke:
			c.SetState(c.State() + 1)
		case count:
			return actor.Respond(c, m, c.State())
		}
		return nil
	}, actor.WithAskTimeout(time.Minute))
	sys := newSystem(t, system.Config{Linger: time.Hour}, def)
	ctx := ctxT(t)
	from := def.Ref(sys, "from") // warm after the first round (see above)
	for i := range 10 {
		got := make(chan int, 1)
		to := def.Ref(sys, fmt.Sprint("to", i))
		if err := from.Tell(ctx, tellThenAsk{To: to, Got: got}); err != nil {
			t.Fatal(err)
		}
		if n := recv(t, got, "the answer"); n != 1 {
			t.Fatalf("count %d, want 1", n)
		}
	}
}
