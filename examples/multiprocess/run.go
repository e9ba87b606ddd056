package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
)

// Config says what run starts.
type Config struct {
	// Nodes is the number of node processes, at least 2.
	Nodes int
	// Command starts one node: the program and its first arguments; run
	// appends -members, and -seed with the first node's address for the
	// others.
	Command []string
	// Keys is the number of counters spread over the nodes. Default 12.
	Keys int
	// afterStart, if set, runs once every node is ready; an error ends
	// run there (tests use it to fail half-way).
	afterStart func(pids []int) error
}

// Outcome is what run observed.
type Outcome struct {
	PIDs       []int             // every node process started, in order
	Served     map[string]string // key -> address of the node serving it before the kill
	Killed     string            // address of the node killed
	MovedTo    map[string]string // key of the killed node -> address serving it after
	Failed     int               // asks that failed between the kill and recovery
	FailedErr  error             // the first of them
	LongestAsk time.Duration     // the longest of the asks after the kill
	Detected   time.Duration     // from the kill until the client saw the node dead
	Recovered  time.Duration     // from the kill until every key of the killed node was served again
	Warnings   []string          // nodes that reported errors while leaving
}

// run starts cfg.Nodes node processes, forms a cluster, spreads counters
// over it, kills the node serving the most keys with SIGKILL, waits until
// its keys are served by the survivors, and stops every node. Whatever
// happens, no node it started outlives it.
func run(ctx context.Context, out io.Writer, cfg Config) (o Outcome, err error) {
	if cfg.Nodes < 2 {
		return o, fmt.Errorf("config: Nodes is %d: a kill needs at least 2 nodes", cfg.Nodes)
	}
	if cfg.Keys == 0 {
		cfg.Keys = 12
	}
	warn := func(w string) { o.Warnings = append(o.Warnings, w) }
	var procs []*proc
	defer func() { err = errors.Join(err, stopAll(procs, warn)) }()

	// The first node is every other node's seed.
	command := append(slices.Clone(cfg.Command), "-members", strconv.Itoa(cfg.Nodes))
	first, err := startProc(command)
	if err != nil {
		return o, err
	}
	procs = append(procs, first)
	seed, err := first.waitReady(ctx)
	if err != nil {
		return o, err
	}
	for range cfg.Nodes - 1 {
		p, err := startProc(append(slices.Clone(command), "-seed", seed))
		if err != nil {
			return o, err
		}
		procs = append(procs, p)
	}
	var addrs []string
	for _, p := range procs {
		if _, err := p.waitReady(ctx); err != nil {
			return o, err
		}
		o.PIDs = append(o.PIDs, p.pid())
		addrs = append(addrs, p.addr)
		fmt.Fprintf(out, "started node pid %d at %s\n", p.pid(), p.addr)
	}
	// Each node says when it places keys on every node: then they all
	// agree where each key lives.
	for _, p := range procs {
		if _, err := p.waitLine(ctx, "settled"); err != nil {
			return o, err
		}
	}
	if cfg.afterStart != nil {
		if err := cfg.afterStart(o.PIDs); err != nil {
			return o, err
		}
	}

	// A client reaches the keys from outside: it computes the ring from the
	// member list and sends each message straight to the key's owner.
	c, err := client.New(ctx, client.Config{ClusterName: clusterName, Seeds: addrs})
	if err != nil {
		return o, err
	}
	defer c.Close()
	if err := poll(ctx, fmt.Sprintf("%d members alive", cfg.Nodes), func() bool {
		return countStatus(c.Members(), cluster.StatusAlive) == cfg.Nodes
	}); err != nil {
		return o, err
	}
	fmt.Fprintf(out, "cluster formed: the client sees %d members alive\n", cfg.Nodes)

	// Counter i gets i+1, then is read back from the same client: one
	// sender's messages arrive in order.
	o.Served = map[string]string{}
	perNode := map[string][]string{}
	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
		ref := Counter.Ref(c, keys[i])
		if err := ref.Tell(ctx, Add{N: i + 1}); err != nil {
			return o, fmt.Errorf("tell %s: %w", keys[i], err)
		}
		got, err := actor.Ask(ctx, ref, Get{})
		if err != nil {
			return o, fmt.Errorf("ask %s: %w", keys[i], err)
		}
		if got.N != i+1 {
			return o, fmt.Errorf("%s counted %d, want %d", keys[i], got.N, i+1)
		}
		o.Served[keys[i]] = got.Node
		perNode[got.Node] = append(perNode[got.Node], keys[i])
	}
	for _, p := range procs {
		fmt.Fprintf(out, "  %s serves %v\n", p.addr, perNode[p.addr])
	}

	// Kill -9 the node serving the most keys: no goodbye, no handover.
	victim := procs[0]
	for _, p := range procs {
		if len(perNode[p.addr]) > len(perNode[victim.addr]) {
			victim = p
		}
	}
	o.Killed = victim.addr
	killed := time.Now()
	if err := victim.kill(); err != nil {
		return o, err
	}
	fmt.Fprintf(out, "killed pid %d (%s) with SIGKILL\n", victim.pid(), victim.addr)

	// Its keys move once the cluster declares it dead; asks waiting on it
	// then fail with actor.ErrUnavailable, and are retried here.
	o.MovedTo = map[string]string{}
	moved := map[string][]string{}
	pending := slices.Clone(perNode[victim.addr])
	err = poll(ctx, fmt.Sprintf("the keys of %s to be served again", victim.addr), func() bool {
		if o.Detected == 0 && !slices.ContainsFunc(c.Members(), func(m cluster.Member) bool {
			return m.ID.Addr == victim.addr && m.Status == cluster.StatusAlive
		}) {
			o.Detected = time.Since(killed)
		}
		pending = slices.DeleteFunc(pending, func(key string) bool {
			askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			got, err := actor.Ask(askCtx, Counter.Ref(c, key), Get{})
			o.LongestAsk = max(o.LongestAsk, time.Since(start))
			if err == nil && got.Node == victim.addr {
				err = fmt.Errorf("%s answered from the killed node", key)
			}
			if err != nil {
				o.Failed++
				if o.FailedErr == nil {
					o.FailedErr = err
				}
				return false
			}
			o.MovedTo[key] = got.Node
			moved[got.Node] = append(moved[got.Node], fmt.Sprintf("%s=%d", key, got.N))
			return true
		})
		return len(pending) == 0
	})
	if err != nil {
		return o, err
	}
	o.Recovered = time.Since(killed)
	fmt.Fprintf(out, "the client saw it dead after %v; all %d of its keys were served again after %v (%d asks failed meanwhile)\n",
		o.Detected.Round(time.Millisecond), len(o.MovedTo), o.Recovered.Round(time.Millisecond), o.Failed)
	for _, p := range procs {
		if p != victim {
			slices.Sort(moved[p.addr])
			fmt.Fprintf(out, "  %s now also serves %v\n", p.addr, moved[p.addr])
		}
	}
	fmt.Fprintln(out, "moved counters restart at 0: state is not replicated yet, so it died with the node")

	// The keys of the survivors stayed where they were, with their counts.
	for i, key := range keys {
		if o.Served[key] == victim.addr {
			continue
		}
		got, err := actor.Ask(ctx, Counter.Ref(c, key), Get{})
		if err != nil {
			return o, fmt.Errorf("ask %s: %w", key, err)
		}
		if got.N != i+1 || got.Node != o.Served[key] {
			return o, fmt.Errorf("%s: got %d on %s, want %d on %s", key, got.N, got.Node, i+1, o.Served[key])
		}
	}
	fmt.Fprintf(out, "the other %d keys stayed put with their counts\n", len(keys)-len(o.MovedTo))

	// The survivors stop one by one, each leaving the cluster in order.
	c.Close()
	survivors := slices.DeleteFunc(procs, func(p *proc) bool { return p == victim })
	procs = nil
	for _, p := range survivors {
		if err := stopAll([]*proc{p}, warn); err != nil {
			return o, errors.Join(err, stopAll(survivors, warn))
		}
	}
	fmt.Fprintf(out, "stopped the %d survivors one by one: each left the cluster in order\n", len(survivors))
	for _, w := range o.Warnings {
		fmt.Fprintln(out, "warning:", w)
	}
	return o, nil
}

// countStatus counts the members in status s.
func countStatus(ms []cluster.Member, s cluster.Status) int {
	n := 0
	for _, m := range ms {
		if m.Status == s {
			n++
		}
	}
	return n
}

// poll calls cond every 20 ms until it holds or ctx ends.
func poll(ctx context.Context, what string, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
