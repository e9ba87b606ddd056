package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
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
	FirstMoved time.Duration     // from the kill until a survivor answered the first key of the killed node
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
	procs, err = startNodes(ctx, out, cfg.Command, cfg.Nodes)
	for _, p := range procs {
		o.PIDs = append(o.PIDs, p.pid())
	}
	if err != nil {
		return o, err
	}
	if cfg.afterStart != nil {
		if err := cfg.afterStart(o.PIDs); err != nil {
			return o, err
		}
	}
	// A client reaches the keys from outside: it computes the ring from the
	// member list and sends each message straight to the key's owner.
	c, err := client.New(ctx, client.Config{ClusterName: clusterName, Seeds: []string{procs[0].addr}})
	if err != nil {
		return o, err
	}
	defer c.Close()
	if _, err := c.WaitAlive(ctx, cfg.Nodes); err != nil {
		return o, err
	}
	fmt.Fprintf(out, "cluster formed: the client sees %d members alive\n", cfg.Nodes)
	keys := keyNames(cfg.Keys)
	perNode, err := spread(ctx, c, keys, &o)
	if err != nil {
		return o, err
	}
	for _, p := range procs {
		fmt.Fprintf(out, "  %s serves %v\n", p.addr, perNode[p.addr])
	}
	victim := busiest(procs, perNode)
	if err := killAndRecover(ctx, out, c, victim, perNode[victim.addr], &o); err != nil {
		return o, err
	}
	if err := checkStayed(ctx, out, c, keys, o); err != nil {
		return o, err
	}
	c.Close()
	survivors := slices.DeleteFunc(procs, func(p *proc) bool { return p == victim })
	procs = nil
	if err := stopInTurn(survivors, warn); err != nil {
		return o, err
	}
	fmt.Fprintf(out, "stopped the %d survivors one by one: each left the cluster in order\n", len(survivors))
	for _, w := range o.Warnings {
		fmt.Fprintln(out, "warning:", w)
	}
	return o, nil
}

// startNodes starts n node processes, the first every other node's seed,
// and waits until each says it is settled: it sees all n alive, so they
// all agree where each key lives. It returns the processes started, also
// on error.
func startNodes(ctx context.Context, out io.Writer, command []string, n int) ([]*proc, error) {
	command = append(slices.Clone(command), "-members", strconv.Itoa(n))
	first, err := startProc(command)
	if err != nil {
		return nil, err
	}
	procs := []*proc{first}
	seed, err := first.waitReady(ctx)
	if err != nil {
		return procs, err
	}
	for range n - 1 {
		p, err := startProc(append(slices.Clone(command), "-seed", seed))
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if _, err := p.waitReady(ctx); err != nil {
			return procs, err
		}
		fmt.Fprintf(out, "started node pid %d at %s\n", p.pid(), p.addr)
	}
	for _, p := range procs {
		if _, err := p.waitLine(ctx, "settled"); err != nil {
			return procs, err
		}
	}
	return procs, nil
}

// keyNames names n counters k00, k01, ...
func keyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	return keys
}

// busiest returns the node serving the most keys.
func busiest(procs []*proc, perNode map[string][]string) *proc {
	b := procs[0]
	for _, p := range procs {
		if len(perNode[p.addr]) > len(perNode[b.addr]) {
			b = p
		}
	}
	return b
}

// stopInTurn stops the nodes one by one, each leaving the cluster in
// order; if one fails to stop, it stops the rest at once.
func stopInTurn(procs []*proc, warn func(string)) error {
	for _, p := range procs {
		if err := stopAll([]*proc{p}, warn); err != nil {
			return errors.Join(err, stopAll(procs, warn))
		}
	}
	return nil
}

// spread gives counter i the count i+1 and reads it back from the same
// client (one sender's messages arrive in order). It records in o which
// node serves each key and returns the keys of each node.
func spread(ctx context.Context, c *client.Client, keys []string, o *Outcome) (map[string][]string, error) {
	o.Served = map[string]string{}
	perNode := map[string][]string{}
	for i, key := range keys {
		ref := Counter.Ref(c, key)
		if err := ref.Tell(ctx, Add{N: i + 1}); err != nil {
			return nil, fmt.Errorf("tell %s: %w", key, err)
		}
		got, err := actor.Ask(ctx, ref, Get{})
		if err != nil {
			return nil, fmt.Errorf("ask %s: %w", key, err)
		}
		if got.N != i+1 {
			return nil, fmt.Errorf("%s counted %d, want %d", key, got.N, i+1)
		}
		o.Served[key] = got.Node
		perNode[got.Node] = append(perNode[got.Node], key)
	}
	return perNode, nil
}

// killAndRecover kills victim with SIGKILL (no goodbye, no hand-over)
// and asks its keys until the survivors serve them, which they do once
// the cluster has declared it dead.
func killAndRecover(ctx context.Context, out io.Writer, c *client.Client, victim *proc, theirs []string, o *Outcome) error {
	o.Killed = victim.addr
	killed := time.Now()
	if err := victim.kill(); err != nil {
		return err
	}
	fmt.Fprintf(out, "killed pid %d (%s) with SIGKILL\n", victim.pid(), victim.addr)
	o.MovedTo = map[string]string{}
	moved := map[string][]string{}
	for _, key := range theirs {
		got, err := askMoved(ctx, c, key, victim.addr, o)
		if err != nil {
			return err
		}
		if len(o.MovedTo) == 0 {
			o.FirstMoved = time.Since(killed)
		}
		o.MovedTo[key] = got.Node
		moved[got.Node] = append(moved[got.Node], fmt.Sprintf("%s=%d", key, got.N))
	}
	o.Recovered = time.Since(killed)
	fmt.Fprintf(out, "a survivor served its first key after %v; all %d of its keys were served again after %v (%d asks failed meanwhile)\n",
		o.FirstMoved.Round(time.Millisecond), len(o.MovedTo), o.Recovered.Round(time.Millisecond), o.Failed)
	for _, addr := range slices.Sorted(maps.Keys(moved)) {
		slices.Sort(moved[addr])
		fmt.Fprintf(out, "  %s now also serves %v\n", addr, moved[addr])
	}
	fmt.Fprintln(out, "moved counters restart at 0: state is not replicated yet, so it died with the node")
	return nil
}

// askMoved asks key, which the dead node served, until a survivor answers.
// Until the cluster declares the node dead, asks for its keys fail with
// actor.ErrUnavailable (or time out): they are retried.
func askMoved(ctx context.Context, c *client.Client, key, dead string, o *Outcome) (Count, error) {
	for {
		askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		got, err := actor.Ask(askCtx, Counter.Ref(c, key), Get{})
		cancel()
		o.LongestAsk = max(o.LongestAsk, time.Since(start))
		if err == nil && got.Node == dead {
			err = fmt.Errorf("%s answered from the killed node", key)
		}
		if err == nil {
			return got, nil
		}
		o.Failed++
		if o.FailedErr == nil {
			o.FailedErr = err
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("ask %s after the kill: %w (last: %v)", key, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkStayed checks that the keys of the survivors stayed where they
// were, with their counts.
func checkStayed(ctx context.Context, out io.Writer, c *client.Client, keys []string, o Outcome) error {
	for i, key := range keys {
		if o.Served[key] == o.Killed {
			continue
		}
		got, err := actor.Ask(ctx, Counter.Ref(c, key), Get{})
		if err != nil {
			return fmt.Errorf("ask %s: %w", key, err)
		}
		if got.N != i+1 || got.Node != o.Served[key] {
			return fmt.Errorf("%s: got %d on %s, want %d on %s", key, got.N, got.Node, i+1, o.Served[key])
		}
	}
	fmt.Fprintf(out, "the other %d keys stayed put with their counts\n", len(keys)-len(o.MovedTo))
	return nil
}
