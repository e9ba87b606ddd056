package chaostest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
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
	// regWhere answers the member serving the register.
	regWhere struct{ actor.Reply[regMsg, string] }
)

func (regRead) regMsg()  {}
func (regWrite) regMsg() {}
func (regCAS) regMsg()   {}
func (regWhere) regMsg() {}

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
	case regWhere:
		return actor.Respond(c, m, c.Member())
	}
	return nil
}, actor.WithReplicas(3, actor.WriteMajority)).WithMessages(regRead{}, regWrite{}, regCAS{}, regWhere{})

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

// A ledger adds amounts, replicated like a register; keyed asks add each
// once (actor.WithIdempotencyKey). Each answer is the sum after the add,
// so the answers of one ledger's adds are distinct.
type (
	ledgerMsg interface{ ledgerMsg() }
	ledgerAdd struct {
		actor.Reply[ledgerMsg, int]
		N int
	}
)

func (ledgerAdd) ledgerMsg() {}

var ledger = actor.Define("ledger", func(c *actor.Context[int, ledgerMsg], m ledgerMsg) error {
	switch m := m.(type) {
	case ledgerAdd:
		c.SetState(c.State() + m.N)
		return actor.Respond(c, m, c.State())
	}
	return nil
}, actor.WithReplicas(3, actor.WriteMajority)).WithMessages(ledgerAdd{})

// The member role's parameters.
const (
	envAddr    = "TROUPE_CHAOS_ADDR"  // address to listen on and advertise
	envSeeds   = "TROUPE_CHAOS_SEEDS" // comma-separated
	envDataDir = "TROUPE_CHAOS_DATA"
	envSync    = "TROUPE_CHAOS_SYNC" // "1": fsync before acknowledging
	envLog     = "TROUPE_CHAOS_LOG"  // set: members log at Info to stderr
	// envProbe names a register the member itself reads and writes every
	// few milliseconds through its own system, printing each outcome as
	// "probe <op> <call> <return> <value> <ok>" (times in Unix
	// nanoseconds; a write's value is unique to this member).
	envProbe = "TROUPE_CHAOS_PROBE"
	// envSettle lists member counts (comma-separated): the member prints
	// "settled <n>" once its own view holds n members ready, for each in
	// turn.
	envSettle = "TROUPE_CHAOS_SETTLE"
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
	cfg := system.Config{Actors: []actor.Definition{register, tally, ledger}, Cluster: &cc, LeaveTimeout: 2 * time.Second,
		DataDir: os.Getenv(envDataDir), Sync: os.Getenv(envSync) == "1"}
	// Warnings always go to stderr, which the parent keeps (tests read
	// them); TROUPE_CHAOS_LOG adds the rest.
	level := slog.LevelWarn
	if os.Getenv(envLog) != "" {
		level = slog.LevelInfo
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	s, err := system.Start(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	// A prober waits for SIGUSR1, registered before "ready" so that the
	// parent's signal is never lost.
	start := make(chan os.Signal, 1)
	key := os.Getenv(envProbe)
	if key != "" {
		signal.Notify(start, syscall.SIGUSR1)
	}
	fmt.Printf("ready %s\n", s.Addr())
	if settle := os.Getenv(envSettle); settle != "" {
		go func() {
			for f := range strings.SplitSeq(settle, ",") {
				n, _ := strconv.Atoi(f)
				wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
				_, err := s.WaitAlive(wctx, n)
				wcancel()
				if err != nil {
					fmt.Fprintln(os.Stderr, "member: waiting for the others:", err)
					return
				}
				fmt.Printf("settled %d\n", n)
			}
		}()
	}
	stopProbe := make(chan struct{})
	probed := make(chan struct{})
	if key != "" {
		go func() {
			defer close(probed)
			select {
			case <-start:
			case <-stopProbe:
				return
			}
			probe(s, key, stopProbe)
		}()
	} else {
		close(probed)
	}
	io.Copy(io.Discard, os.Stdin)
	close(stopProbe)
	<-probed
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := s.Close(cctx); err != nil {
		return fail(err)
	}
	return 0
}

// probe reads and writes the register key through s until stop closes,
// printing each outcome for the parent's history. Its writes carry values
// from the member's start time up, so no other client writes them.
func probe(s *system.System, key string, stop <-chan struct{}) {
	ref := register.Ref(s, key)
	next := int(time.Now().UnixNano() % 1_000_000_000 * 1000)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		call := time.Now().UnixNano()
		var err error
		var v int
		op := "read"
		if i%2 == 0 {
			v, err = actor.Ask(ctx, ref, regRead{})
		} else {
			op, v = "write", next
			next++
			_, err = actor.Ask(ctx, ref, regWrite{V: v})
		}
		cancel()
		fmt.Printf("probe %s %d %d %d %v\n", op, call, time.Now().UnixNano(), v, err == nil)
		pause := time.NewTimer(20 * time.Millisecond)
		select {
		case <-stop:
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}
