// Command localcluster runs a Troupe cluster of three members in one
// process, on loopback, with the fast timings: no outside services. It
// spreads counters over the members, stops one of them in an orderly way
// (Close: it leaves the cluster) and shows its keys served by the others.
//
//	go run ./examples/localcluster
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// CounterMsg is what a counter accepts.
type CounterMsg interface{ counterMsg() }

// Add adds N to the counter.
type Add struct{ N int }

// Get asks for the counter's value and the member serving it.
type Get struct{ actor.Reply[CounterMsg, Count] }

// Count is a counter's value and the address of the member that serves it.
type Count struct {
	N    int
	Node string
}

func (Add) counterMsg() {}
func (Get) counterMsg() {}

// node is what a counter knows of the member it runs on: its address,
// known once Start has picked a free port.
type node struct{ addr atomic.Pointer[string] }

func (n *node) Addr() string {
	if n == nil || n.addr.Load() == nil {
		return "?"
	}
	return *n.addr.Load()
}

// counterOn is the counter type as hosted by one member. Every member
// registers the same type (the name, messages and handler are what make
// it one); this instance's replies name the member they come from.
func counterOn(n *node) *actor.Def[int, CounterMsg] {
	return actor.Define("counter", func(c *actor.Context[int, CounterMsg], m CounterMsg) error {
		switch m := m.(type) {
		case Add:
			c.SetState(c.State() + m.N)
		case Get:
			return actor.Respond(c, m, Count{N: c.State(), Node: n.Addr()})
		}
		return nil
	}).WithMessages(Add{}, Get{})
}

// Counter is the counter type, for taking refs: Counter.Ref(sys, key)
// reaches the key on whichever member serves it.
var Counter = counterOn(nil)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

// keys are the counters the example spreads over the members.
var keys = []string{"ada", "bob", "cyd", "dee", "eve", "fay", "gus", "hal", "ivy", "jo", "kit", "lou"}

// outcome is what run observed, for the test.
type outcome struct {
	members []string          // the members' addresses
	served  map[string]string // key -> member, before the leave
	left    string            // the member that left
	movedTo map[string]string // key of the leaver -> its new member
	retries int               // asks that failed after the leave and were retried
	retried error             // the first of their errors
}

func run(ctx context.Context, out io.Writer) error {
	_, err := runCluster(ctx, out)
	return err
}

func runCluster(ctx context.Context, out io.Writer) (outcome, error) {
	o := outcome{served: map[string]string{}, movedTo: map[string]string{}}
	// Start three members; the first is the others' seed.
	var systems []*system.System
	defer func() {
		for _, s := range systems {
			closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s.Close(closeCtx) // a no-op for the member that already left
			cancel()
		}
	}()
	var seeds []string
	for range 3 {
		n := &node{}
		cc := cluster.FastConfig("127.0.0.1:0") // port 0: a free port
		cc.ClusterName = "localcluster"
		cc.Seeds = seeds
		sys, err := system.Start(ctx, system.Config{
			Actors:  []actor.Definition{counterOn(n)},
			Cluster: &cc,
		})
		if err != nil {
			return o, err
		}
		addr := sys.Addr()
		n.addr.Store(&addr)
		systems = append(systems, sys)
		seeds = []string{systems[0].Addr()}
	}
	if err := waitAgreed(ctx, systems, 3); err != nil {
		return o, err
	}
	for _, s := range systems {
		o.members = append(o.members, s.Addr())
	}
	fmt.Fprintf(out, "3 members on loopback: %s, %s, %s\n", systems[0].Addr(), systems[1].Addr(), systems[2].Addr())

	// Each key gets i+1 from one member, which then reads it back: a ref
	// reaches the key's one activation wherever it lives, and one sender's
	// messages arrive in order.
	perNode := map[string][]string{}
	for i, key := range keys {
		if err := Counter.Ref(systems[i%3], key).Tell(ctx, Add{N: i + 1}); err != nil {
			return o, fmt.Errorf("tell %s: %w", key, err)
		}
	}
	for i, key := range keys {
		got, err := actor.Ask(ctx, Counter.Ref(systems[i%3], key), Get{})
		if err != nil {
			return o, fmt.Errorf("ask %s: %w", key, err)
		}
		if got.N != i+1 {
			return o, fmt.Errorf("%s counted %d, want %d", key, got.N, i+1)
		}
		o.served[key] = got.Node
		perNode[got.Node] = append(perNode[got.Node], key)
	}
	for _, s := range systems {
		fmt.Fprintf(out, "  %s serves %v\n", s.Addr(), perNode[s.Addr()])
	}

	// The member serving the most keys leaves: Close hands its keys over.
	leaver := systems[0]
	for _, s := range systems {
		if len(perNode[s.Addr()]) > len(perNode[leaver.Addr()]) {
			leaver = s
		}
	}
	o.left = leaver.Addr()
	start := time.Now()
	if err := leaver.Close(ctx); err != nil {
		return o, fmt.Errorf("close %s: %w", o.left, err)
	}
	closed := time.Now()
	fmt.Fprintf(out, "%s left the cluster (Close took %v)\n", o.left, closed.Sub(start).Round(time.Millisecond))
	survivors := slices.DeleteFunc(slices.Clone(systems), func(s *system.System) bool { return s == leaver })

	// Its keys are now served by the survivors. Their counts start again
	// from 0: state is not replicated yet, so it does not move with a key.
	// An ask can still fail in the first milliseconds after the leave
	// (a known bug, see TestOrderlyLeaveFailsNoAsk): it is retried.
	moved := map[string][]string{}
	for i, key := range perNode[o.left] {
		from := survivors[i%len(survivors)]
		var got Count
		for {
			var err error
			got, err = actor.Ask(ctx, Counter.Ref(from, key), Get{})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return o, fmt.Errorf("ask %s after the leave: %w", key, err)
			}
			o.retries++
			if o.retried == nil {
				o.retried = fmt.Errorf("ask %s from %s, %v after Close returned: %w", key, from.Addr(), time.Since(closed), err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got.Node == o.left {
			return o, fmt.Errorf("%s still served by %s, which left", key, o.left)
		}
		o.movedTo[key] = got.Node
		moved[got.Node] = append(moved[got.Node], fmt.Sprintf("%s=%d", key, got.N))
	}
	for _, s := range survivors {
		fmt.Fprintf(out, "  %s now also serves %v\n", s.Addr(), moved[s.Addr()])
	}
	fmt.Fprintf(out, "%d keys moved, %d asks retried; moved counters restart at 0 (state is not replicated yet)\n",
		len(o.movedTo), o.retries)

	// The other keys stayed where they were, with their counts.
	for i, key := range keys {
		if o.served[key] == o.left {
			continue
		}
		got, err := actor.Ask(ctx, Counter.Ref(survivors[i%2], key), Get{})
		if err != nil {
			return o, fmt.Errorf("ask %s: %w", key, err)
		}
		if got.N != i+1 || got.Node != o.served[key] {
			return o, fmt.Errorf("%s: got %d on %s, want %d on %s", key, got.N, got.Node, i+1, o.served[key])
		}
	}
	fmt.Fprintf(out, "the other %d keys stayed put with their counts\n", len(keys)-len(o.movedTo))
	return o, nil
}

// waitAgreed waits until every member places keys on the same want
// members, all alive: from then on they agree where each key lives.
func waitAgreed(ctx context.Context, systems []*system.System, want int) error {
	for {
		ms := systems[0].Members()
		agree := alive(ms) == want
		for _, s := range systems[1:] {
			agree = agree && slices.EqualFunc(ms, s.Members(), cluster.Member.Equal)
		}
		if agree {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("waiting for %d members to agree", want), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// alive counts the members in ms that are alive.
func alive(ms []cluster.Member) int {
	n := 0
	for _, m := range ms {
		if m.Status == cluster.StatusAlive {
			n++
		}
	}
	return n
}
