package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// Messages of the remote counter: they cross processes, so the definition
// lists them (WithMessages).
type (
	rcMsg interface{ rcMsg() }
	rAdd  struct{ N int }
	rGet  struct{ actor.Reply[rcMsg, int] }
	// rWhere answers the address of the member that serves the key.
	rWhere struct{ actor.Reply[rcMsg, string] }
	// rInc adds one and answers the new count: a write whose answer
	// leaves only once the count met its write level.
	rInc struct{ actor.Reply[rcMsg, int] }
)

func (rAdd) rcMsg()   {}
func (rGet) rcMsg()   {}
func (rWhere) rcMsg() {}
func (rInc) rcMsg()   {}

func rcounterHandler(c *actor.Context[int, rcMsg], m rcMsg) error {
	switch m := m.(type) {
	case rAdd:
		c.SetState(c.State() + m.N)
	case rGet:
		return actor.Respond(c, m, c.State())
	case rWhere:
		return actor.Respond(c, m, c.Member())
	case rInc:
		c.SetState(c.State() + 1)
		return actor.Respond(c, m, c.State())
	}
	return nil
}

var rcounter = actor.Define("rcounter", rcounterHandler,
	actor.WithMailbox(troupeMailbox, actor.Wait)).WithMessages(rAdd{}, rGet{}, rWhere{}, rInc{})

// replicas is the replicated-write workload's replica count.
const replicas = 3

// rrcounter is rcounter with three copies of each count, written at
// Majority: the replicated-write workload.
var rrcounter = actor.Define("rrcounter", rcounterHandler, actor.WithMailbox(troupeMailbox, actor.Wait),
	actor.WithReplicas(replicas, actor.WriteMajority)).WithMessages(rAdd{}, rGet{}, rWhere{}, rInc{})

// clusterConfig is the member config of the remote workloads: loopback,
// a free port, the fast timings unless timings is "default".
func clusterConfig(seeds []string, timings string) cluster.Config {
	cc := cluster.FastConfig("127.0.0.1:0")
	if timings == "default" {
		cc = cluster.DefaultConfig("127.0.0.1:0")
	}
	cc.ClusterName = "bench"
	cc.Seeds = seeds
	return cc
}

// startMember starts a cluster member hosting rcounter, rrcounter and
// rblob. Keys stay active for the whole run (IdleTimeout 1 h) so a
// counter keeps its count.
func startMember(seeds []string, timings string) (*system.System, error) {
	cc := clusterConfig(seeds, timings)
	catchUpRate, _ := strconv.Atoi(os.Getenv(catchUpEnv)) // unset: 0, the default
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{
		Actors: []actor.Definition{rcounter, rrcounter, rblob}, Cluster: &cc,
		IdleTimeout: time.Hour, LeaveTimeout: 2 * time.Second,
		Logger:  memberLogger(),
		DataDir: os.Getenv(dataEnv), Sync: os.Getenv(syncEnv) == "1",
		CatchUpRate: catchUpRate,
	})
	if err != nil {
		return nil, err
	}
	return sys, nil
}

// memberLogger logs to stderr at the level named by TROUPE_BENCH_LOG
// (debug, info, warn, error), tagged with the process id; unset, nothing.
func memberLogger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(os.Getenv(logEnv))); err != nil || os.Getenv(logEnv) == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})).With("pid", os.Getpid())
}

// startTroupeNode starts a member; its answer to the query "stats" is
// statsAnswer of its Stats.
func startTroupeNode(seeds []string, timings string) (string, func() error, func(string) string, error) {
	sys, err := startMember(seeds, timings)
	if err != nil {
		return "", nil, nil, err
	}
	answer := func(q string) string {
		if q != "stats" {
			return "unknown query"
		}
		return statsAnswer(sys.Stats())
	}
	return sys.Addr(), func() error {
		ctx, cancel := closeCtx()
		defer cancel()
		return sys.Close(ctx)
	}, answer, nil
}

// keyOn returns a key of rcounter that member at serves, as seen from sys.
func keyOn(sys actor.System, at, prefix string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 1000 {
		key := prefix + strconv.Itoa(i)
		where, err := askSettling(ctx, rcounter.Ref(sys, key), rWhere{})
		if err != nil {
			return "", err
		}
		if where == at {
			return key, nil
		}
	}
	return "", fmt.Errorf("troupe: no key of 1000 lives on %s", at)
}

// askSettling asks, and asks again (for up to 5 s) while the answer is
// ErrUnavailable: right after a cluster started, a client's view may
// still lose members to a list pushed by a member that has not seen them
// yet (see BENCHMARKS.md).
func askSettling[M any, Q actor.Request[M, R], R any](ctx context.Context, ref actor.Ref[M], q Q) (R, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := actor.Ask[M, Q, R](ctx, ref, q)
		if err == nil || !errors.Is(err, actor.ErrUnavailable) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// troupeRemote is a server node and this process as a second member of
// its cluster; ref is a counter the server node owns.
type troupeRemote struct {
	server *node
	sys    *system.System
	ref    actor.Ref[rcMsg]
}

func (e *remoteEnv) troupeEnv() (*troupeRemote, error) {
	if e == nil {
		return nil, errNoEnv
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.troupe != nil {
		return e.troupe, nil
	}
	// The default timings: this cluster lives for the whole run, through
	// the other workloads' load, and measures the data path, not failure
	// detection (see BENCHMARKS.md for what the fast ones did here).
	n, err := startNode("troupe", timesEnv+"=default")
	if err != nil {
		return nil, err
	}
	e.onClose(func() { n.stop(5 * time.Second) })
	sys, err := startMember([]string{n.addr}, "default")
	if err != nil {
		return nil, err
	}
	e.onClose(func() {
		ctx, cancel := closeCtx()
		defer cancel()
		sys.Close(ctx)
	})
	// Both members alive and done joining, so that the key chosen on
	// the node stays there: a member still joining is not placed on.
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err = sys.WaitAlive(wctx, 2)
	wcancel()
	if err != nil {
		return nil, err
	}
	key, err := keyOn(sys, n.addr, "c")
	if err != nil {
		return nil, err
	}
	e.troupe = &troupeRemote{server: n, sys: sys, ref: rcounter.Ref(sys, key)}
	return e.troupe, nil
}

// check fails when the counter no longer lives on the node (placement
// changed: a member was taken for dead).
func (t *troupeRemote) check(ctx context.Context) error {
	where, err := actor.Ask(ctx, t.ref, rWhere{})
	if err != nil {
		return err
	}
	if where != t.server.addr {
		return fmt.Errorf("troupe: the remote counter moved from the node %s to %q; members seen here: %v", t.server.addr, where, t.sys.Members())
	}
	return nil
}

func (p troupePeer) RemoteTell(clk *clock, n int) error {
	t, err := p.rem.troupeEnv()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := t.check(ctx); err != nil {
		return err
	}
	base, err := actor.Ask(ctx, t.ref, rGet{})
	if err != nil {
		return err
	}
	clk.node(t.server.cmd.Process.Pid)
	clk.start()
	for range n {
		if err := t.ref.Tell(ctx, rAdd{N: 1}); err != nil {
			return err
		}
	}
	last, since := -1, time.Now()
	for {
		got, err := actor.Ask(ctx, t.ref, rGet{})
		if err != nil {
			return err
		}
		if got == base+n {
			break
		}
		if got > base+n {
			return fmt.Errorf("troupe: remote counter at %d, want %d", got, base+n)
		}
		if got != last {
			last, since = got, time.Now()
		} else if time.Since(since) > stallAfter {
			where, _ := actor.Ask(ctx, t.ref, rWhere{})
			return fmt.Errorf("troupe: remote counter stuck at %d of %d for %v (%d tells missing); the key is now served by %q (the node is %s); members seen here: %v",
				got-base, n, stallAfter, base+n-got, where, t.server.addr, t.sys.Members())
		}
	}
	clk.stop()
	return nil
}

// stallAfter fails remote-tell when the count stops growing this long
// short of the total: tells were lost.
const stallAfter = 10 * time.Second

func (p troupePeer) RemoteAsk(clk *clock, n int, timeout time.Duration) ([]time.Duration, error) {
	t, err := p.rem.troupeEnv()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, n)
	clk.node(t.server.cmd.Process.Pid)
	clk.start()
	for i := range lat {
		t0 := time.Now()
		actx, cancel := ctx, context.CancelFunc(nil)
		if timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, timeout)
		}
		_, err := actor.Ask(actx, t.ref, rGet{})
		if cancel != nil {
			cancel()
		}
		if err != nil {
			return nil, err
		}
		lat[i] = time.Since(t0)
	}
	clk.stop()
	return lat, nil
}
