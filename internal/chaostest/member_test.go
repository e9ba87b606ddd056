package chaostest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/system"
)

// A register is an integer per key, replicated on three members and
// written at Majority: read, write and compare-and-set.
type (
	regMsg   interface{ regMsg() }
	regRead  struct{ actor.Reply[regMsg, int] }
	regWrite struct {
		V int
		actor.Reply[regMsg, bool]
	}
	regCAS struct {
		Old, New int
		actor.Reply[regMsg, bool]
	}
)

func (regRead) regMsg()  {}
func (regWrite) regMsg() {}
func (regCAS) regMsg()   {}

var register = actor.Define("register", func(c *actor.Context[int, regMsg], m regMsg) error {
	switch m := m.(type) {
	case regRead:
		return actor.Respond(c, m, c.State())
	case regWrite:
		c.SetState(m.V)
		return actor.Respond(c, m, true)
	case regCAS:
		if c.State() != m.Old {
			return actor.Respond(c, m, false)
		}
		c.SetState(m.New)
		return actor.Respond(c, m, true)
	}
	return nil
}, actor.WithReplicas(3, actor.WriteMajority)).WithMessages(regRead{}, regWrite{}, regCAS{})

// A tally counts increments, replicated like a register: each answer is
// the count after the increment, so the highest answer a client got is a
// lower bound on what the cluster must still hold.
type (
	tallyMsg interface{ tallyMsg() }
	tallyInc struct{ actor.Reply[tallyMsg, int] }
	tallyGet struct{ actor.Reply[tallyMsg, int] }
)

func (tallyInc) tallyMsg() {}
func (tallyGet) tallyMsg() {}

var tally = actor.Define("tally", func(c *actor.Context[int, tallyMsg], m tallyMsg) error {
	switch m := m.(type) {
	case tallyInc:
		c.SetState(c.State() + 1)
		return actor.Respond(c, m, c.State())
	case tallyGet:
		return actor.Respond(c, m, c.State())
	}
	return nil
}, actor.WithReplicas(3, actor.WriteMajority)).WithMessages(tallyInc{}, tallyGet{})

// The member role's parameters.
const (
	envAddr    = "TROUPE_CHAOS_ADDR"  // address to listen on and advertise
	envSeeds   = "TROUPE_CHAOS_SEEDS" // comma-separated
	envDataDir = "TROUPE_CHAOS_DATA"
	envSync    = "TROUPE_CHAOS_SYNC" // "1": fsync before acknowledging
	envLog     = "TROUPE_CHAOS_LOG"  // set: members log at Info to stderr
)

const clusterName = "chaos"

// timings are FastTimings with a DeadAfter of 1 s (the step-down grace,
// DeadAfter/2, must outlast a loaded machine's hiccups under -race) and a
// RemoveAfter longer than a run, so that the dead stay in the ring as
// they do in production for minutes.
func timings() cluster.Timings {
	tm := cluster.FastTimings()
	tm.DeadAfter = time.Second
	tm.RemoveAfter = 5 * time.Minute
	tm.TombstoneTTL = 10 * time.Minute
	return tm
}

// runMember is the body of a member process; it runs inside its lab
// host's namespace (ip netns exec), so it listens and dials there. It
// prints "ready" once joined and closes when its stdin does (or dies by
// SIGKILL).
func runMember() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "member:", err)
		return 2
	}
	cc := cluster.FastConfig(os.Getenv(envAddr))
	cc.ClusterName = clusterName
	cc.Timings = timings()
	cc.Seeds = strings.Split(os.Getenv(envSeeds), ",")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := system.Config{Actors: []actor.Definition{register, tally}, Cluster: &cc, LeaveTimeout: 2 * time.Second,
		DataDir: os.Getenv(envDataDir), Sync: os.Getenv(envSync) == "1"}
	if os.Getenv(envLog) != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := system.Start(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("ready %s\n", s.Addr())
	io.Copy(io.Discard, os.Stdin)
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := s.Close(cctx); err != nil {
		return fail(err)
	}
	return 0
}
