// Command localcluster runs a Troupe cluster of three members in one
// process, on loopback, with the fast timings: no outside services. It
// spreads counters over the members, stops one of them in an orderly way
// (Close: it leaves the cluster) and shows its keys served by the others.
//
// Each member has an admin listener on a free loopback port (health,
// readiness, Prometheus metrics, the management API and the operator's
// page in a browser, see docs/operations.md); the example prints its
// URLs. With -serve the survivors stay up, so that a person can open
// them, or ask them with the troupe CLI, until Ctrl-C.
//
//	go run ./examples/localcluster
//	go run ./examples/localcluster -serve
//	go run ./cmd/troupe --addr <an admin address it printed> members
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// ReadOnly tells the runtime that Get changes nothing: should a counter's
// member die before answering, a Get is asked again of
// the key's new owner rather than failing with actor.ErrOutcomeUnknown.
func (Get) ReadOnly() {}

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
	serve := flag.Bool("serve", false, "keep the members that stay up, with their admin listeners, until Ctrl-C")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var hold func([]*system.System)
	if *serve {
		hold = func([]*system.System) {
			sig, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			fmt.Println("serving the admin URLs above; Ctrl-C to stop")
			<-sig.Done()
		}
	}
	if err := run(ctx, os.Stdout, hold); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

// keys are the counters the example spreads over the members.
var keys = []string{"ada", "bob", "cyd", "dee", "eve", "fay", "gus", "hal", "ivy", "jo", "kit", "lou"}

// outcome is what run observed, for the test.
type outcome struct {
	members []string          // the members' addresses
	admins  []string          // their admin listeners' addresses
	readyz  []int             // what each /readyz answered once the members were up
	served  map[string]string // key -> member, before the leave
	left    string            // the member that left
	movedTo map[string]string // key of the leaver -> its new member
}

// run runs the example; hold, if not nil, is called with the members
// still up before they close (it returns when they may).
func run(ctx context.Context, out io.Writer, hold func(survivors []*system.System)) error {
	_, err := runCluster(ctx, out, hold)
	return err
}

// runCluster starts three members, spreads the keys over them, has the
// busiest one leave and checks where every key is served afterwards.
// hold, if not nil, is called before the survivors close.
func runCluster(ctx context.Context, out io.Writer, hold func(survivors []*system.System)) (outcome, error) {
	o := outcome{served: map[string]string{}, movedTo: map[string]string{}}
	systems, err := startMembers(ctx, 3)
	defer closeAll(systems)
	if err != nil {
		return o, err
	}
	for _, s := range systems {
		o.members = append(o.members, s.Addr())
	}
	fmt.Fprintf(out, "3 members on loopback: %s\n", strings.Join(o.members, ", "))
	for _, s := range systems {
		code, err := readyz(ctx, s.AdminAddr())
		if err != nil {
			return o, fmt.Errorf("%s: %w", s.Addr(), err)
		}
		o.admins = append(o.admins, s.AdminAddr())
		o.readyz = append(o.readyz, code)
		base := "http://" + s.AdminAddr()
		fmt.Fprintf(out, "  %s admin: %s/healthz %s/readyz (%d) %s/metrics %s/api/v1/status\n", s.Addr(), base, base, code, base, base)
		fmt.Fprintf(out, "  %s UI, for a browser: %s/\n", s.Addr(), base)
	}
	perNode, err := spread(ctx, systems, o.served)
	if err != nil {
		return o, err
	}
	for _, s := range systems {
		fmt.Fprintf(out, "  %s serves %v\n", s.Addr(), perNode[s.Addr()])
	}
	leaver := systems[0]
	for _, s := range systems {
		if len(perNode[s.Addr()]) > len(perNode[leaver.Addr()]) {
			leaver = s
		}
	}
	o.left = leaver.Addr()
	// Close leaves the cluster: the member hands its keys over first.
	start := time.Now()
	if err := leaver.Close(ctx); err != nil {
		return o, fmt.Errorf("close %s: %w", o.left, err)
	}
	fmt.Fprintf(out, "%s left the cluster (Close took %v)\n", o.left, time.Since(start).Round(time.Millisecond))
	survivors := slices.DeleteFunc(slices.Clone(systems), func(s *system.System) bool { return s == leaver })
	if err := checkMoved(ctx, out, survivors, perNode[o.left], &o); err != nil {
		return o, err
	}
	if err := checkStayed(ctx, out, survivors, o); err != nil {
		return o, err
	}
	if hold != nil {
		hold(survivors)
	}
	return o, nil
}

// readyz asks a member's admin listener whether the member is ready and
// returns the status code: 200 when it is, 503 otherwise.
func readyz(ctx context.Context, addr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return 0, err
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// startMembers starts n members on loopback, the first the others' seed,
// and waits until each sees all n alive: from then on they agree where
// each key lives. It returns the members started, also on error.
func startMembers(ctx context.Context, n int) ([]*system.System, error) {
	var systems []*system.System
	var seeds []string
	for range n {
		me := &node{}
		cc := cluster.FastConfig("127.0.0.1:0") // port 0: a free port
		cc.ClusterName = "localcluster"
		cc.Seeds = seeds
		// Each member its own registry: one process, three members.
		sys, err := system.Start(ctx, system.Config{Actors: []actor.Definition{counterOn(me)}, Cluster: &cc,
			Metrics: prometheus.NewRegistry(),
			Admin:   &system.AdminConfig{Bind: "127.0.0.1:0", Health: true, Metrics: true, API: true, UI: true}})
		if err != nil {
			return systems, err
		}
		addr := sys.Addr()
		me.addr.Store(&addr)
		systems = append(systems, sys)
		seeds = []string{systems[0].Addr()}
	}
	for _, s := range systems {
		if _, err := s.WaitAlive(ctx, n); err != nil {
			return systems, err
		}
	}
	return systems, nil
}

// closeAll closes the members; closing one that already left does nothing.
func closeAll(systems []*system.System) {
	for _, s := range systems {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s.Close(ctx)
		cancel()
	}
}

// spread gives key i the count i+1, sent from member i%3, and reads it
// back: a ref reaches the key's one activation wherever it lives, and one
// sender's messages arrive in order. It records in served which member
// serves each key and returns the keys of each member.
func spread(ctx context.Context, systems []*system.System, served map[string]string) (map[string][]string, error) {
	for i, key := range keys {
		if err := Counter.Ref(systems[i%len(systems)], key).Tell(ctx, Add{N: i + 1}); err != nil {
			return nil, fmt.Errorf("tell %s: %w", key, err)
		}
	}
	perNode := map[string][]string{}
	for i, key := range keys {
		got, err := actor.Ask(ctx, Counter.Ref(systems[i%len(systems)], key), Get{})
		if err != nil {
			return nil, fmt.Errorf("ask %s: %w", key, err)
		}
		if got.N != i+1 {
			return nil, fmt.Errorf("%s counted %d, want %d", key, got.N, i+1)
		}
		served[key] = got.Node
		perNode[got.Node] = append(perNode[got.Node], key)
	}
	return perNode, nil
}

// checkMoved asks the keys of the member that left from the survivors:
// another member serves each at once. Their counts start again from 0:
// state is not replicated yet, so it does not move with a key.
func checkMoved(ctx context.Context, out io.Writer, survivors []*system.System, theirs []string, o *outcome) error {
	moved := map[string][]string{}
	for i, key := range theirs {
		got, err := actor.Ask(ctx, Counter.Ref(survivors[i%len(survivors)], key), Get{})
		if err != nil {
			return fmt.Errorf("ask %s after the leave: %w", key, err)
		}
		if got.Node == o.left {
			return fmt.Errorf("%s still served by %s, which left", key, o.left)
		}
		o.movedTo[key] = got.Node
		moved[got.Node] = append(moved[got.Node], fmt.Sprintf("%s=%d", key, got.N))
	}
	for _, s := range survivors {
		fmt.Fprintf(out, "  %s now also serves %v\n", s.Addr(), moved[s.Addr()])
	}
	fmt.Fprintf(out, "%d keys moved; moved counters restart at 0 (state is not replicated yet)\n", len(o.movedTo))
	return nil
}

// checkStayed checks that the keys of the other members stayed where they
// were, with their counts.
func checkStayed(ctx context.Context, out io.Writer, survivors []*system.System, o outcome) error {
	for i, key := range keys {
		if o.served[key] == o.left {
			continue
		}
		got, err := actor.Ask(ctx, Counter.Ref(survivors[i%len(survivors)], key), Get{})
		if err != nil {
			return fmt.Errorf("ask %s: %w", key, err)
		}
		if got.N != i+1 || got.Node != o.served[key] {
			return fmt.Errorf("%s: got %d on %s, want %d on %s", key, got.N, got.Node, i+1, o.served[key])
		}
	}
	fmt.Fprintf(out, "the other %d keys stayed put with their counts\n", len(keys)-len(o.movedTo))
	return nil
}
