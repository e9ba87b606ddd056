// Command multiprocess runs a Troupe cluster of N processes on loopback
// and kills one of them with SIGKILL. It starts the nodes by running
// itself with -node, reaches them from a client, spreads counters over
// them, kills the node serving the most keys, and shows its keys served
// by the survivors once the cluster has declared it dead. Then it stops
// every node it started.
//
//	go run ./examples/multiprocess -n 3
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// CounterMsg is what a counter accepts.
type CounterMsg interface{ counterMsg() }

// Add adds N to the counter.
type Add struct{ N int }

// Get asks for the counter's value and the node serving it.
type Get struct{ actor.Reply[CounterMsg, Count] }

// Count is a counter's value and the address of the node that serves it.
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

// node is what a counter knows of the process it runs in: its address,
// known once Start has picked a free port.
type node struct{ addr atomic.Pointer[string] }

func (n *node) Addr() string {
	if a := n.addr.Load(); a != nil {
		return *a
	}
	return "?"
}

// counterOn is the counter type as node n hosts it: its replies name the
// node. Every node registers the same type (the name, messages and
// handler are what make it one).
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

// Counter is the counter type, for taking refs from the client.
var Counter = counterOn(&node{})

const clusterName = "multiprocess"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-node" {
		os.Exit(nodeMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	n := flag.Int("n", 3, "number of node processes")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err == nil {
		_, err = run(ctx, os.Stdout, Config{Nodes: *n, Command: []string{self, "-node"}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "multiprocess:", err)
		os.Exit(1)
	}
}

// Node exit codes besides 0.
const (
	exitFailed  = 1 // it could not start
	exitUsage   = 2
	exitUnclean = 3 // it served, but its leave or shutdown reported an error
)

// nodeMain is a node process: it joins the cluster through -seed (none
// for the first node) and prints "ready <addr>" on out; once it places
// keys on -members members, all alive, it prints "settled". It serves
// until in closes (its parent stopped it, or died) or it is signalled;
// then it leaves the cluster in order.
func nodeMain(args []string, in io.Reader, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(errOut)
	seed := fs.String("seed", "", "address of a member to join through")
	members := fs.Int("members", 1, "cluster size to wait for before printing settled")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stdinClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, in)
		close(stdinClosed)
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stdinClosed:
			cancel()
		case <-ctx.Done():
		}
	}()

	startCtx, cancelStart := context.WithTimeout(ctx, 20*time.Second)
	defer cancelStart()
	cc := cluster.FastConfig("127.0.0.1:0")
	cc.ClusterName = clusterName
	if *seed != "" {
		cc.Seeds = []string{*seed}
	}
	self := &node{}
	sys, err := system.Start(startCtx, system.Config{
		Actors:  []actor.Definition{counterOn(self)},
		Cluster: &cc,
	})
	if err != nil {
		fmt.Fprintln(errOut, "node:", err)
		return exitFailed
	}
	addr := sys.Addr()
	self.addr.Store(&addr)
	fmt.Fprintf(out, "ready %s\n", addr)
	if _, err := sys.WaitAlive(ctx, *members); err == nil {
		fmt.Fprintln(out, "settled")
	}
	<-ctx.Done()

	closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelClose()
	if err := sys.Close(closeCtx); err != nil {
		fmt.Fprintln(errOut, "node: close:", err)
		return exitUnclean
	}
	return 0
}
