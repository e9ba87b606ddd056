// Command agents runs one pinned actor, an agent, on each member of a
// three-member cluster on loopback, and drives them from a client. A
// pinned key lives on the member its ref names (Def.RefAt) instead of
// where the ring places it: use it for work tied to a machine (its disk,
// its GPU, its local cache). Unlike ring-placed keys, it does not move
// when its member goes: its ref fails with actor.ErrUnavailable.
//
//	go run ./examples/agents
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// AgentMsg is what an agent accepts.
type AgentMsg interface{ agentMsg() }

// Work hands the agent a job.
type Work struct{ Job string }

// Report asks the agent what it has done.
type Report struct{ actor.Reply[AgentMsg, Done] }

// Done is an agent's report: the member it runs on and its jobs so far.
type Done struct {
	Node string
	Jobs []string
}

func (Work) agentMsg()   {}
func (Report) agentMsg() {}

// Agent is pinned: the key of Agent.RefAt(sys, addr, "agent") is
// "addr/agent", and it runs on the member at addr. Its state starts from
// that key, so it knows its member.
var Agent = actor.Define("agent", func(c *actor.Context[Done, AgentMsg], m AgentMsg) error {
	switch m := m.(type) {
	case Work:
		c.Update(func(d Done) Done {
			d.Jobs = append(slices.Clip(d.Jobs), m.Job) // copy on write
			return d
		})
	case Report:
		return actor.Respond(c, m, c.State())
	}
	return nil
}, actor.Pinned()).WithMessages(Work{}, Report{}).WithInit(func(key string) Done {
	node, _, _ := strings.Cut(key, "/")
	return Done{Node: node}
})

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agents:", err)
		os.Exit(1)
	}
}

// outcome is what run observed, for the test.
type outcome struct {
	members []string          // addresses of the members the client found
	reports map[string]Done   // member -> its agent's report
	active  []int             // activations on each member
	left    string            // the member that left
	leftErr error             // asking its agent afterwards
	after   map[string]string // member -> who answered for its agent after the leave
}

func run(ctx context.Context, out io.Writer) (o outcome, err error) {
	systems, err := startMembers(ctx, 3)
	defer func() {
		for _, s := range systems {
			closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s.Close(closeCtx) // cleanup: each leaves in turn
			cancel()
		}
	}()
	if err != nil {
		return o, err
	}
	// The client learns the members from a seed; it waits until it sees
	// all three alive.
	c, err := client.New(ctx, client.Config{ClusterName: "agents", Seeds: []string{systems[0].Addr()}})
	if err != nil {
		return o, err
	}
	defer c.Close()
	ms, err := c.WaitAlive(ctx, len(systems))
	if err != nil {
		return o, err
	}
	o.members = agentMembers(ms)
	fmt.Fprintf(out, "the client sees %d members hosting agents: %v\n", len(o.members), o.members)
	if err := dispatch(ctx, out, c, &o); err != nil {
		return o, err
	}
	// Each agent ran on its own member, and nowhere else.
	for _, s := range systems {
		o.active = append(o.active, s.Stats().Active)
	}
	fmt.Fprintf(out, "activations per member: %v (each member runs its own agent only)\n", o.active)
	leaver := systems[2]
	systems = systems[:2]
	return o, leave(ctx, out, c, leaver, systems, &o)
}

// startMembers starts n members hosting agents, the first the others'
// seed. It returns the members started, also on error.
func startMembers(ctx context.Context, n int) ([]*system.System, error) {
	var systems []*system.System
	var seeds []string
	for range n {
		cc := cluster.FastConfig("127.0.0.1:0")
		cc.ClusterName = "agents"
		cc.Seeds = seeds
		sys, err := system.Start(ctx, system.Config{Actors: []actor.Definition{Agent}, Cluster: &cc})
		if err != nil {
			return systems, err
		}
		systems = append(systems, sys)
		seeds = []string{systems[0].Addr()}
	}
	return systems, nil
}

// dispatch sends jobs round robin, one agent per member, and collects
// each agent's report.
func dispatch(ctx context.Context, out io.Writer, c *client.Client, o *outcome) error {
	for i := range 9 {
		addr := o.members[i%len(o.members)]
		if err := Agent.RefAt(c, addr, "agent").Tell(ctx, Work{Job: fmt.Sprintf("job-%d", i)}); err != nil {
			return err
		}
	}
	o.reports = map[string]Done{}
	for _, addr := range o.members {
		d, err := actor.Ask(ctx, Agent.RefAt(c, addr, "agent"), Report{})
		if err != nil {
			return fmt.Errorf("ask the agent on %s: %w (the client lists %v)", addr, err, c.Members())
		}
		o.reports[addr] = d
		fmt.Fprintf(out, "  the agent of %s did %v\n", d.Node, d.Jobs)
	}
	return nil
}

// leave has leaver leave the cluster. Its agent does not move: once the
// client knows the member is gone, asking the agent fails with
// ErrUnavailable, while the agents of the others still answer.
func leave(ctx context.Context, out io.Writer, c *client.Client, leaver *system.System, others []*system.System, o *outcome) error {
	o.left = leaver.Addr()
	if err := leaver.Close(ctx); err != nil {
		return err
	}
	if _, err := c.WaitAlive(ctx, len(others)); err != nil {
		return err
	}
	_, o.leftErr = actor.Ask(ctx, Agent.RefAt(c, o.left, "agent"), Report{})
	if !errors.Is(o.leftErr, actor.ErrUnavailable) {
		return fmt.Errorf("ask the agent of %s, which left: %v, want ErrUnavailable (the client lists %v)", o.left, o.leftErr, c.Members())
	}
	fmt.Fprintf(out, "%s left; its agent did not move: %v\n", o.left, o.leftErr)
	o.after = map[string]string{}
	for _, s := range others {
		d, err := actor.Ask(ctx, Agent.RefAt(c, s.Addr(), "agent"), Report{})
		if err != nil {
			return fmt.Errorf("ask the agent on %s: %w", s.Addr(), err)
		}
		o.after[s.Addr()] = d.Node
		fmt.Fprintf(out, "  the agent of %s still answers, with its %d jobs\n", d.Node, len(d.Jobs))
	}
	return nil
}

// agentMembers lists the alive members that host agents.
func agentMembers(ms []cluster.Member) []string {
	var addrs []string
	for _, m := range ms {
		if m.Status == cluster.StatusAlive && slices.Contains(m.ActorTypes, Agent.Name()) {
			addrs = append(addrs, m.ID.Addr)
		}
	}
	slices.Sort(addrs)
	return addrs
}
