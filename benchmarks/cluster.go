package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
)

// Troupe-only workloads on a cluster of node processes, reached from this
// process through a client.Client (a non-member).

// startCluster starts n troupe nodes (the first is the seed of the others)
// with timings ("" fast, "default"); extra, if set, gives node i more
// environment.
func startCluster(n int, timings string, extra ...func(i int) []string) ([]*node, error) {
	var nodes []*node
	var seeds []string
	for i := range n {
		env := []string{timesEnv + "=" + timings}
		for _, f := range extra {
			env = append(env, f(i)...)
		}
		if seeds != nil {
			env = append(env, seedsEnv+"="+strings.Join(seeds, ","))
		}
		nd, err := startNode("troupe", env...)
		if err != nil {
			stopAll(nodes)
			return nil, err
		}
		nodes = append(nodes, nd)
		if seeds == nil {
			seeds = []string{nd.addr}
		}
	}
	return nodes, nil
}

func stopAll(nodes []*node) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.stop(5 * time.Second) }()
	}
	wg.Wait()
}

// newClient connects a client to nodes and waits until it knows them all
// alive (at most 30 s).
func newClient(nodes []*node) (*client.Client, error) {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{ClusterName: "bench", Seeds: addrs, SyncInterval: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	// Alive and done joining on every member: placement is settled.
	if _, err := c.WaitAlive(ctx, len(nodes)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ClientAsk has goroutines goroutines ask, through a client, n asks in all
// to keys keys spread over a cluster of nodes processes, each goroutine
// one ask at a time; it returns the latency of every ask.
func (troupePeer) ClientAsk(clk *clock, nodes, goroutines, keys, n int) (lat []time.Duration, err error) {
	ns, err := startCluster(nodes, "default")
	if err != nil {
		return nil, err
	}
	defer stopAll(ns)
	c, err := newClient(ns)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	refs := make([]actor.Ref[rcMsg], keys)
	ctx := context.Background()
	served := map[string]int{}
	for i := range refs {
		refs[i] = rcounter.Ref(c, activationKey(i))
		where, err := askSettling(ctx, refs[i], rWhere{}) // activates the key, outside the clock
		if err != nil {
			return nil, err
		}
		served[where]++
	}
	if len(served) != min(nodes, keys) {
		return nil, fmt.Errorf("troupe: %d keys served by %d nodes, want %d: %v", keys, len(served), min(nodes, keys), served)
	}
	per := n / goroutines
	lat = make([]time.Duration, per*goroutines)
	errs := make(chan error, goroutines)
	for _, nd := range ns {
		clk.node(nd.cmd.Process.Pid)
	}
	clk.start()
	for g := range goroutines {
		go func() {
			mine := lat[g*per : (g+1)*per]
			for i := range mine {
				ref := refs[(g+i*goroutines)%keys]
				t0 := time.Now()
				if _, err := actor.Ask(ctx, ref, rGet{}); err != nil {
					errs <- err
					return
				}
				mine[i] = time.Since(t0)
			}
			errs <- nil
		}()
	}
	for range goroutines {
		err = errors.Join(err, <-errs)
	}
	clk.stop()
	return lat, err
}

// Failover starts a cluster of nodes processes with timings, activates a
// key on one of them, kills that node (kill -9) and asks the key through a
// client until an answer comes from another node. It returns the time from
// the kill to that answer and how many asks failed meanwhile (each waits
// at most 50 ms).
func (troupePeer) Failover(clk *clock, nodes int, timings string) (failed int, err error) {
	ns, err := startCluster(nodes, timings)
	if err != nil {
		return 0, err
	}
	defer stopAll(ns)
	c, err := newClient(ns)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	victim := ns[len(ns)-1]
	key, err := keyOn(c, victim.addr, "f")
	if err != nil {
		return 0, err
	}
	ref := rcounter.Ref(c, key)
	if err := ref.Tell(context.Background(), rAdd{N: 1}); err != nil {
		return 0, err
	}
	clk.start()
	victim.kill()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		where, err := actor.Ask(ctx, ref, rWhere{})
		cancel()
		if err == nil && where != victim.addr {
			break
		}
		failed++
		if time.Now().After(deadline) {
			return failed, fmt.Errorf("troupe: no answer for %s from another node 60 s after killing its owner (last: %q, %v)", key, where, err)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			time.Sleep(time.Millisecond) // failed fast: do not spin
		}
	}
	clk.stop()
	return failed, nil
}

// ReplicatedWrite starts a cluster of nodes processes (with a DataDir
// each and Sync when sync is set) and has goroutines goroutines, through
// a client, write n times in all to keys keys of rrcounter (three
// replicas, Majority), each goroutine one write at a time; then the same
// on rcounter (one copy, nothing stored) in the same cluster, for the
// ratio. It returns the latency of every replicated write and the
// unreplicated rate.
func (troupePeer) ReplicatedWrite(clk *clock, nodes, goroutines, keys, n int, sync bool) (lat []time.Duration, base float64, err error) {
	dir, err := os.MkdirTemp("", "troupe-bench-replicated-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	ns, err := startCluster(nodes, "", func(i int) []string {
		if !sync {
			return nil
		}
		return []string{dataEnv + "=" + filepath.Join(dir, strconv.Itoa(i)), syncEnv + "=1"}
	})
	if err != nil {
		return nil, 0, err
	}
	defer stopAll(ns)
	c, err := newClient(ns)
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	write := func(def *actor.Def[int, rcMsg], clk *clock) ([]time.Duration, error) {
		refs := make([]actor.Ref[rcMsg], keys)
		for i := range refs {
			refs[i] = def.Ref(c, activationKey(i))
		}
		// Activate every key first, outside the clock: an activation of a
		// replicated key acquires it on its replica set.
		if err := inParallel(goroutines, keys, func(i int) error {
			_, err := askSettling(context.Background(), refs[i], rGet{})
			return err
		}); err != nil {
			return nil, err
		}
		per := n / goroutines
		lat := make([]time.Duration, per*goroutines)
		for _, nd := range ns {
			clk.node(nd.cmd.Process.Pid)
			if os.Getenv(profEnv) != "" {
				if _, err := nd.query("profile " + def.Name()); err != nil {
					return nil, err
				}
			}
		}
		clk.start()
		err := inParallel(goroutines, goroutines, func(g int) error {
			mine := lat[g*per : (g+1)*per]
			for i := range mine {
				t0 := time.Now()
				if _, err := actor.Ask(context.Background(), refs[(g+i*goroutines)%keys], rInc{}); err != nil {
					return err
				}
				mine[i] = time.Since(t0)
			}
			return nil
		})
		clk.stop()
		return lat, err
	}
	var bclk clock
	if _, err := write(rcounter, &bclk); err != nil {
		return nil, 0, fmt.Errorf("unreplicated writes: %w", err)
	}
	base = bclk.rate(n / goroutines * goroutines).primary
	lat, err = write(rrcounter, clk)
	return lat, base, err
}

// inParallel runs f(0..n-1) on g goroutines and returns the first error.
func inParallel(g, n int, f func(i int) error) error {
	var next atomic.Int64
	errs := make(chan error, g)
	for range g {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					errs <- nil
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
	for range g {
		err = errors.Join(err, <-errs)
	}
	return err
}

// continuityResult is what ContinuityAsk measured.
type continuityResult struct {
	keyed, replayed []time.Duration // each keyed ask's latency; each replay's
	plain           float64         // plain replicated asks/s, same cluster, right before
	plainP50        time.Duration
}

// ContinuityAsk starts a cluster of nodes processes and has goroutines
// goroutines, through a client, ask rInc n times in all of keys keys of
// rrcounter (three replicas, Majority): first plain asks, then asks that
// each carry an idempotency key of their own (the answer is kept in the
// key's record, written with the state), then every goroutine's asks
// again under the same idempotency keys (each answered from what was
// kept, the handler not run). The keyed asks are timed by clk.
func (troupePeer) ContinuityAsk(clk *clock, nodes, goroutines, keys, n int) (continuityResult, error) {
	var res continuityResult
	ns, err := startCluster(nodes, "")
	if err != nil {
		return res, err
	}
	defer stopAll(ns)
	c, err := newClient(ns)
	if err != nil {
		return res, err
	}
	defer c.Close()
	refs := make([]actor.Ref[rcMsg], keys)
	for i := range refs {
		refs[i] = rrcounter.Ref(c, activationKey(i))
	}
	if err := inParallel(goroutines, keys, func(i int) error {
		_, err := askSettling(context.Background(), refs[i], rGet{})
		return err
	}); err != nil {
		return res, err
	}
	per := n / goroutines
	run := func(phase string, clk *clock, idem func(g, i int) string) ([]time.Duration, error) {
		lat := make([]time.Duration, per*goroutines)
		if os.Getenv(profEnv) != "" {
			for _, nd := range ns {
				if _, err := nd.query("profile continuity-" + phase); err != nil {
					return nil, err
				}
			}
		}
		if clk != nil {
			for _, nd := range ns {
				clk.node(nd.cmd.Process.Pid)
			}
			clk.start()
			defer clk.stop()
		}
		err := inParallel(goroutines, goroutines, func(g int) error {
			mine := lat[g*per : (g+1)*per]
			for i := range mine {
				ctx := context.Background()
				if idem != nil {
					ctx = actor.WithIdempotencyKey(ctx, idem(g, i))
				}
				t0 := time.Now()
				if _, err := actor.Ask(ctx, refs[(g+i*goroutines)%keys], rInc{}); err != nil {
					return err
				}
				mine[i] = time.Since(t0)
			}
			return nil
		})
		return lat, err
	}
	var pclk clock
	plain, err := run("plain", &pclk, nil)
	if err != nil {
		return res, fmt.Errorf("plain asks: %w", err)
	}
	res.plain = pclk.rate(per * goroutines).primary
	res.plainP50 = percentile(plain, 0.50)
	key := func(g, i int) string { return "k" + strconv.Itoa(g) + "-" + strconv.Itoa(i) }
	if res.keyed, err = run("keyed", clk, key); err != nil {
		return res, fmt.Errorf("keyed asks: %w", err)
	}
	// The replays: the last asks of each goroutine, whose answers the
	// keys still keep (in their records or their pages).
	if res.replayed, err = run("replayed", nil, key); err != nil {
		return res, fmt.Errorf("replayed asks: %w", err)
	}
	return res, nil
}
