// Command benchmarks runs the same workloads on Troupe and on Proto.Actor
// Go in one process, alternating between them over several rounds, and
// prints the median of each, a ratio line per workload and whether the
// floors in BENCHMARKS.md hold:
//
//	ratio <workload> <troupe/protoactor>
//
// Higher is better for Troupe: rates are divided as they are, times and
// bytes inversely. See README.md.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if code, ok := nodeMain(); ok { // a node of the remote workloads
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line.
type options struct {
	only       []string
	systems    []string
	rounds     int
	warmup     bool
	sz         sizes
	mailbox    int
	cpuprofile string
	quietLog   bool
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("benchmarks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("only", "", "comma-separated workloads to run (default all: tell,tell-many,ask,pingpong,activate,remote-tell,remote-ask,client-ask,replicated-write,replicated-write-sync,continuity-ask,handoff-transfer,tell-metrics,ask-metrics,failover-fast,failover-default)")
	systems := fs.String("systems", "troupe,protoactor", "comma-separated systems to run (one alone prints no ratio; for profiling)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds; each measures every workload once on each system")
	fs.BoolVar(&o.warmup, "warmup", true, "run every workload once at a tenth of its size before the rounds, unreported")
	fs.IntVar(&o.sz.TellN, "tell-n", 2_000_000, "tell: messages")
	fs.IntVar(&o.sz.ManySenders, "many-senders", 4, "tell-many: sender goroutines")
	fs.IntVar(&o.sz.ManyKeys, "many-keys", 64, "tell-many: actors")
	manyN := fs.Int("many-n", 2_000_000, "tell-many: messages in all (rounded down to a multiple of senders*keys)")
	fs.IntVar(&o.sz.AskN, "ask-n", 100_000, "ask: sequential asks")
	fs.IntVar(&o.sz.Pairs, "pairs", 4, "pingpong: actor pairs")
	fs.IntVar(&o.sz.PingPongM, "pingpong-m", 200_000, "pingpong: messages per pair")
	fs.IntVar(&o.sz.ActivateKeys, "activate-keys", 1_000_000, "activate: keys")
	fs.DurationVar(&o.sz.ActivateQuiet, "activate-quiet", 50*time.Millisecond, "activate: extra settle time after the runtime's goroutines left, before the heap is read")
	fs.IntVar(&o.sz.RemoteTellN, "remote-tell-n", 1_000_000, "remote-tell: messages")
	fs.IntVar(&o.sz.RemoteAskN, "remote-ask-n", 10_000, "remote-ask: sequential asks (and bare TCP round trips)")
	fs.DurationVar(&o.sz.RemoteAskTimeout, "remote-ask-timeout", 0, "remote-ask: if positive, each ask gets its own context.WithTimeout of this length (the deadline path) instead of context.Background")
	fs.IntVar(&o.sz.ClientNodes, "client-nodes", 3, "client-ask: node processes in the cluster")
	fs.IntVar(&o.sz.ClientGos, "client-goroutines", 64, "client-ask: goroutines asking, one ask at a time each")
	fs.IntVar(&o.sz.ClientKeys, "client-keys", 1024, "client-ask: keys asked (round-robin)")
	fs.IntVar(&o.sz.ClientAskN, "client-ask-n", 200_000, "client-ask: asks in all (rounded down to a multiple of -client-goroutines)")
	fs.IntVar(&o.sz.ReplNodes, "repl-nodes", 3, "replicated-write: node processes in the cluster")
	fs.IntVar(&o.sz.ReplGos, "repl-goroutines", 64, "replicated-write: goroutines writing, one write at a time each")
	fs.IntVar(&o.sz.ReplKeys, "repl-keys", 10_000, "replicated-write: keys written (round-robin)")
	fs.IntVar(&o.sz.ReplN, "repl-n", 200_000, "replicated-write: writes in all on each definition (rounded down to a multiple of -repl-goroutines)")
	fs.IntVar(&o.sz.HandoffKeys, "handoff-keys", 20_000, "handoff-transfer: keys of stored state (three copies each) in the cluster before the member comes")
	fs.IntVar(&o.sz.HandoffValue, "handoff-value", 4096, "handoff-transfer: bytes of each key's state (pseudo-random)")
	fs.IntVar(&o.sz.HandoffFillers, "handoff-fillers", 64, "handoff-transfer: goroutines writing the state")
	fs.IntVar(&o.sz.HandoffAskers, "handoff-askers", 4, "handoff-transfer: goroutines of the ask load, one ask at a time each")
	fs.Float64Var(&o.sz.HandoffAskRate, "handoff-ask-rate", 1000, "handoff-transfer: asks per second of the ask load, in all")
	fs.IntVar(&o.sz.HandoffCatchUpRate, "handoff-catchup-rate", 0, "handoff-transfer: the members' system.Config.CatchUpRate in bytes/s (0: its default, 32 MiB/s; negative: no limit)")
	fs.DurationVar(&o.sz.HandoffIdle, "handoff-idle", 3*time.Second, "handoff-transfer: how long the ask load runs before the member comes (the idle p99)")
	fs.DurationVar(&o.sz.HandoffQuiet, "handoff-quiet", 15*time.Second, "handoff-transfer: how long the member may show no sign of receiving (Stats.Receiving and ReceivedBytes 0) once up before the workload fails")
	fs.StringVar(&o.sz.HandoffVia, "handoff-via", viaJoin, "handoff-transfer: how a member comes to receive state: "+viaJoin+" (a fourth member joins with an empty DataDir) or "+viaRestart+" (the third is killed and restarts on its DataDir, catching the whole ring up)")
	fs.IntVar(&o.sz.FailoverNodes, "failover-nodes", 3, "failover-*: node processes in the cluster (one is killed)")
	fs.IntVar(&o.mailbox, "troupe-mailbox", troupeMailbox, "Troupe's mailbox bound (Wait overflow) in the throughput workloads")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the rounds to this file")
	fs.BoolVar(&o.quietLog, "q", false, "do not log each measurement to stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	o.only = names
	if *only != "" {
		o.only = strings.Split(*only, ",")
		for _, n := range o.only {
			if !slices.Contains(names, n) {
				return o, fmt.Errorf("-only: unknown workload %q (have %s)", n, strings.Join(names, ","))
			}
		}
	}
	o.systems = strings.Split(*systems, ",")
	for _, s := range o.systems {
		if s != "troupe" && s != "protoactor" {
			return o, fmt.Errorf("-systems: unknown system %q (have troupe,protoactor)", s)
		}
	}
	if o.sz.ManySenders < 1 || o.sz.ManyKeys < 1 || *manyN < o.sz.ManySenders*o.sz.ManyKeys {
		return o, errors.New("-many-n must be at least -many-senders * -many-keys, both positive")
	}
	o.sz.ManyPer = *manyN / (o.sz.ManySenders * o.sz.ManyKeys)
	if o.sz.ClientGos > 0 && o.sz.ClientAskN < o.sz.ClientGos {
		return o, errors.New("-client-ask-n must be at least -client-goroutines")
	}
	if o.sz.ReplN < o.sz.ReplGos {
		return o, errors.New("-repl-n must be at least -repl-goroutines")
	}
	if o.sz.HandoffAskRate <= 0 || o.sz.HandoffIdle <= 0 || o.sz.HandoffQuiet <= 0 {
		return o, errors.New("-handoff-ask-rate, -handoff-idle and -handoff-quiet must be positive")
	}
	if o.sz.HandoffVia != viaJoin && o.sz.HandoffVia != viaRestart {
		return o, fmt.Errorf("-handoff-via %q: want %s or %s", o.sz.HandoffVia, viaJoin, viaRestart)
	}
	if o.sz.FailoverNodes < 2 {
		return o, errors.New("-failover-nodes must be at least 2")
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"rounds", o.rounds}, {"tell-n", o.sz.TellN}, {"ask-n", o.sz.AskN}, {"pairs", o.sz.Pairs},
		{"pingpong-m", o.sz.PingPongM}, {"activate-keys", o.sz.ActivateKeys}, {"troupe-mailbox", o.mailbox},
		{"remote-tell-n", o.sz.RemoteTellN}, {"remote-ask-n", o.sz.RemoteAskN},
		{"client-nodes", o.sz.ClientNodes}, {"client-goroutines", o.sz.ClientGos}, {"client-keys", o.sz.ClientKeys},
		{"repl-nodes", o.sz.ReplNodes}, {"repl-goroutines", o.sz.ReplGos}, {"repl-keys", o.sz.ReplKeys},
		{"handoff-keys", o.sz.HandoffKeys}, {"handoff-value", o.sz.HandoffValue}, {"handoff-fillers", o.sz.HandoffFillers},
		{"handoff-askers", o.sz.HandoffAskers}} {
		if v.n < 1 {
			return o, fmt.Errorf("-%s must be positive, got %d", v.name, v.n)
		}
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "benchmarks:", err)
		return 2
	}
	// The remote workloads' nodes: started on first use, stopped on the
	// way out, killed on an interrupt.
	env := &remoteEnv{}
	defer env.close()
	stopSignals := killNodesOnSignal(stderr)
	defer stopSignals()
	var peers []peer
	for _, s := range o.systems {
		switch s {
		case "troupe":
			peers = append(peers, troupePeer{mailbox: o.mailbox, rem: env})
		case "protoactor":
			peers = append(peers, protoPeer{rem: env})
		}
	}
	var keys []string
	if slices.Contains(o.only, "activate") {
		keys = activationKeys(o.sz.ActivateKeys)
	}
	logf := func(format string, args ...any) {
		if !o.quietLog {
			fmt.Fprintf(stderr, format, args...)
		}
	}
	header(stdout, o)

	if o.cpuprofile != "" {
		// The remote workloads' nodes profile themselves, whole life.
		os.Setenv(profEnv, o.cpuprofile)
	}
	if o.warmup {
		small := o.sz.scaled(10)
		for _, w := range selected(o.only) {
			if noWarmup[w.name] {
				continue
			}
			for _, p := range runsOn(w, peers) {
				if _, err := w.run(p, &clock{}, small, keys[:min(len(keys), small.ActivateKeys)]); err != nil {
					fmt.Fprintf(stderr, "benchmarks: warmup %s on %s: %v\n", w.name, p.Name(), err)
					return 1
				}
			}
		}
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "benchmarks:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "benchmarks:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}

	// results[workload][peer] holds one measurement per round.
	results := make(map[string]map[string][]measurement)
	// unmeasured are the workloads this Troupe cannot run yet, and why.
	unmeasured := make(map[string]error)
	for r := range o.rounds {
		order := slices.Clone(peers)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, w := range selected(o.only) {
			if len(runsOn(w, order)) == 0 || unmeasured[w.name] != nil {
				continue
			}
			if results[w.name] == nil {
				results[w.name] = make(map[string][]measurement)
			}
			if w.name == "remote-ask" {
				// The baseline: a bare TCP round trip between two processes.
				m, err := env.tcpBaseline(o.sz.RemoteAskN)
				if err != nil {
					fmt.Fprintf(stderr, "benchmarks: round %d tcp baseline: %v\n", r+1, err)
					return 1
				}
				results[w.name][baselineName] = append(results[w.name][baselineName], m)
				logf("round %d/%d %-9s %-10s %s\n", r+1, o.rounds, "tcp-rtt", baselineName, describe("remote-ask", []measurement{m}))
			}
			for _, p := range runsOn(w, order) {
				m, err := measure(o.cpuprofile != "", w, p, o.sz, keys)
				if errors.Is(err, errNoHandoff) {
					// The other workloads still say something.
					fmt.Fprintf(stderr, "benchmarks: round %d %s on %s: %v; not measured\n", r+1, w.name, p.Name(), err)
					unmeasured[w.name] = err
					break
				}
				if err != nil {
					fmt.Fprintf(stderr, "benchmarks: round %d %s on %s: %v\n", r+1, w.name, p.Name(), err)
					return 1
				}
				results[w.name][p.Name()] = append(results[w.name][p.Name()], m)
				logf("round %d/%d %-9s %-10s %s\n", r+1, o.rounds, w.name, p.Name(), describe(w.name, []measurement{m}))
			}
		}
	}

	fmt.Fprintln(stdout)
	report(stdout, o, peers, results)
	for _, w := range selected(o.only) {
		if err := unmeasured[w.name]; err != nil {
			fmt.Fprintf(stdout, "%s: not measured: %v\n", w.name, err)
		}
	}
	return 0
}

// measure runs w once on p. When profiling, the run carries the pprof
// labels workload and system, which the goroutines it starts (senders,
// actors) inherit: `go tool pprof -tagfocus system=troupe` keeps them.
func measure(profiling bool, w workload, p peer, sz sizes, keys []string) (m measurement, err error) {
	if !profiling {
		return w.run(p, &clock{}, sz, keys)
	}
	pprof.Do(context.Background(), pprof.Labels("workload", w.name, "system", p.Name()), func(context.Context) {
		m, err = w.run(p, &clock{}, sz, keys)
	})
	return m, err
}

// runsOn returns the peers w runs on.
func runsOn(w workload, peers []peer) []peer {
	if !troupeOnly[w.name] {
		return peers
	}
	var ps []peer
	for _, p := range peers {
		if p.Name() == "troupe" {
			ps = append(ps, p)
		}
	}
	return ps
}

func selected(only []string) []workload {
	var ws []workload
	for _, w := range workloads {
		if slices.Contains(only, w.name) {
			ws = append(ws, w)
		}
	}
	return ws
}

// scaled divides the workload sizes by f, keeping each at least 1.
func (sz sizes) scaled(f int) sizes {
	s := sz
	for _, v := range []*int{&s.TellN, &s.ManyPer, &s.AskN, &s.PingPongM, &s.ActivateKeys, &s.RemoteTellN, &s.RemoteAskN, &s.ClientAskN} {
		*v = max(1, *v/f)
	}
	return s
}

func header(w io.Writer, o options) {
	paVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/asynkron/protoactor-go" {
				paVersion = d.Version
			}
		}
	}
	fmt.Fprintf(w, "go %s %s/%s, GOMAXPROCS %d, %d CPUs; protoactor-go %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU(), paVersion)
	fmt.Fprintf(w, "rounds %d; tell %d msgs; tell-many %d senders x %d keys x %d; ask %d; pingpong %d pairs x %d; activate %d keys; troupe mailbox %d (wait)\n",
		o.rounds, o.sz.TellN, o.sz.ManySenders, o.sz.ManyKeys, o.sz.ManyPer*o.sz.ManySenders,
		o.sz.AskN, o.sz.Pairs, o.sz.PingPongM, o.sz.ActivateKeys, o.mailbox)
	fmt.Fprintf(w, "remote (two processes on loopback): remote-tell %d msgs; remote-ask %d; client-ask %d nodes, %d goroutines, %d keys, %d asks; failover %d nodes\n",
		o.sz.RemoteTellN, o.sz.RemoteAskN, o.sz.ClientNodes, o.sz.ClientGos, o.sz.ClientKeys, o.sz.ClientAskN/o.sz.ClientGos*o.sz.ClientGos, o.sz.FailoverNodes)
	fmt.Fprintf(w, "replicated-write: %d nodes, %d goroutines, %d keys, %d writes, %d replicas at Majority (-sync: badger DataDir and Sync)\n",
		o.sz.ReplNodes, o.sz.ReplGos, o.sz.ReplKeys, o.sz.ReplN/o.sz.ReplGos*o.sz.ReplGos, replicas)
	fmt.Fprintf(w, "handoff-transfer: 3 nodes, %d keys x %d B, %d replicas at Majority, the member comes by %s; ask load %.0f/s from %d goroutines, idle window %v\n",
		o.sz.HandoffKeys, o.sz.HandoffValue, replicas, o.sz.HandoffVia, o.sz.HandoffAskRate, o.sz.HandoffAskers, o.sz.HandoffIdle)
}

// summary is the median over rounds of each figure of one workload on one
// system.
type summary struct {
	primary, cpuPerOp, perActr, gcCycles, gcCPU        float64
	nodeCPUPerOp, nodeSysPerOp, failed, min, max, base float64
	nodeWrotePerOp                                     float64
	baseCPU                                            float64
	mb, secs, upSecs, earlyMB, idleFailed              float64
	settleSecs                                         float64
	p50, p99, idleP99, streamP99, afterP99             time.Duration
	replayP50, plainP50                                time.Duration
}

func summarize(ms []measurement) summary {
	var s summary
	s.primary = median(ms, func(m measurement) float64 { return m.primary })
	s.cpuPerOp = median(ms, func(m measurement) float64 { return m.cpuPerOp })
	s.nodeCPUPerOp = median(ms, func(m measurement) float64 { return m.nodeCPUPerOp })
	s.nodeSysPerOp = median(ms, func(m measurement) float64 { return m.nodeSysPerOp })
	s.nodeWrotePerOp = median(ms, func(m measurement) float64 { return m.nodeWrotePerOp })
	s.failed = median(ms, func(m measurement) float64 { return m.failed })
	s.min = slices.MinFunc(ms, func(a, b measurement) int { return cmp.Compare(a.primary, b.primary) }).primary
	s.max = slices.MaxFunc(ms, func(a, b measurement) int { return cmp.Compare(a.primary, b.primary) }).primary
	s.perActr = median(ms, func(m measurement) float64 { return m.perActr })
	s.gcCycles = median(ms, func(m measurement) float64 { return m.gcCycles })
	s.gcCPU = median(ms, func(m measurement) float64 { return m.gcCPU })
	s.p50 = time.Duration(median(ms, func(m measurement) float64 { return float64(m.p50) }))
	s.p99 = time.Duration(median(ms, func(m measurement) float64 { return float64(m.p99) }))
	s.base = median(ms, func(m measurement) float64 { return m.base })
	s.baseCPU = median(ms, func(m measurement) float64 { return m.baseCPU })
	s.mb = median(ms, func(m measurement) float64 { return m.mb })
	s.secs = median(ms, func(m measurement) float64 { return m.secs })
	s.upSecs = median(ms, func(m measurement) float64 { return m.upSecs })
	s.settleSecs = median(ms, func(m measurement) float64 { return m.settleSecs })
	s.earlyMB = median(ms, func(m measurement) float64 { return m.earlyMB })
	s.idleFailed = median(ms, func(m measurement) float64 { return m.idleFailed })
	s.idleP99 = time.Duration(median(ms, func(m measurement) float64 { return float64(m.idleP99) }))
	s.streamP99 = time.Duration(median(ms, func(m measurement) float64 { return float64(m.streamP99) }))
	s.afterP99 = time.Duration(median(ms, func(m measurement) float64 { return float64(m.afterP99) }))
	s.replayP50 = time.Duration(median(ms, func(m measurement) float64 { return float64(m.replayP50) }))
	s.plainP50 = time.Duration(median(ms, func(m measurement) float64 { return float64(m.plainP50) }))
	return s
}

// describe prints the medians of ms for workload w.
func describe(w string, ms []measurement) string {
	s := summarize(ms)
	cpu := time.Duration(s.cpuPerOp).String()
	switch w {
	case "ask":
		return fmt.Sprintf("%s asks/s  p50 %v  p99 %v  cpu %s/ask", si(s.primary), s.p50, s.p99, cpu)
	case "remote-ask":
		return fmt.Sprintf("%s asks/s  p50 %v  p99 %v  cpu %s/ask + node %s", si(s.primary), s.p50, s.p99, cpu,
			time.Duration(s.nodeCPUPerOp))
	case "replicated-write", "replicated-write-sync":
		return fmt.Sprintf("%s writes/s  p50 %v  p99 %v  cpu %s/write + nodes %s (%.1f read/write syscalls, %.0f B written); unreplicated %s writes/s", si(s.primary), s.p50, s.p99, cpu,
			time.Duration(s.nodeCPUPerOp), s.nodeSysPerOp, s.nodeWrotePerOp, si(s.base))
	case "client-ask":
		return fmt.Sprintf("%s asks/s  p50 %v  p99 %v  cpu %s/ask + nodes %s", si(s.primary), s.p50, s.p99, cpu,
			time.Duration(s.nodeCPUPerOp))
	case "continuity-ask":
		return fmt.Sprintf("%s keyed asks/s  p50 %v  p99 %v  cpu %s/ask + nodes %s (%.0f B written); plain %s asks/s p50 %v; replayed p50 %v", si(s.primary), s.p50, s.p99, cpu,
			time.Duration(s.nodeCPUPerOp), s.nodeWrotePerOp, si(s.base), s.plainP50, s.replayP50)
	case "handoff-transfer":
		failed := ""
		if s.failed > 0 || s.idleFailed > 0 {
			failed = fmt.Sprintf(" (asks failed: %.0f idle, %.0f during)", s.idleFailed, s.failed)
		}
		return fmt.Sprintf("%.1f MB/s to the joining member (%.1f MB in %.2f s), bulk TCP %.1f MB/s; ask p99 idle %v, during %v (once up %v, after %v)%s; member up after %.2f s (%.1f MB received by then); cpu %s/MB + nodes %s; members quiet %.1f s after the fill",
			s.primary, s.mb, s.secs, s.base, short(s.idleP99), short(s.p99), short(s.streamP99), short(s.afterP99), failed, s.upSecs, s.earlyMB,
			short(time.Duration(s.cpuPerOp)), short(time.Duration(s.nodeCPUPerOp)), s.settleSecs)
	case "failover-fast", "failover-default":
		return fmt.Sprintf("%.3f s from kill -9 to the new owner's answer (min %.3f, max %.3f; %.0f asks failed meanwhile)",
			s.primary, s.min, s.max, s.failed)
	case "tell-metrics":
		return fmt.Sprintf("%s msgs/s with metrics, %s without; cpu %s/msg with, %s without", si(s.primary), si(s.base),
			cpu, time.Duration(s.baseCPU))
	case "ask-metrics":
		return fmt.Sprintf("%s asks/s with metrics, %s without; p50 %v, p99 %v with; cpu %s/ask with, %s without", si(s.primary), si(s.base),
			s.p50, s.p99, cpu, time.Duration(s.baseCPU))
	case "remote-tell":
		return fmt.Sprintf("%s msgs/s  cpu %s/msg + node %s", si(s.primary), cpu, time.Duration(s.nodeCPUPerOp))
	case "activate":
		return fmt.Sprintf("%.3f s  %.0f B/actor  cpu %s/key (%.0f GCs, %.2f GC cpu-s)",
			s.primary, s.perActr, cpu, s.gcCycles, s.gcCPU)
	}
	return fmt.Sprintf("%s msgs/s  cpu %s/msg", si(s.primary), cpu)
}

func report(w io.Writer, o options, peers []peer, results map[string]map[string][]measurement) {
	for _, wl := range selected(o.only) {
		byPeer := results[wl.name]
		for _, p := range peers {
			ms, ok := byPeer[p.Name()]
			switch {
			case !ok:
			case wl.name == "handoff-transfer":
				fmt.Fprintf(w, "%s: %s\n", wl.name, describe(wl.name, ms))
			default:
				fmt.Fprintf(w, "%-9s %-10s %s\n", wl.name, p.Name(), describe(wl.name, ms))
			}
		}
		if b, ok := byPeer[baselineName]; ok {
			s := summarize(b)
			fmt.Fprintf(w, "  baseline: bare TCP round trip, 8 bytes, p50 %v  p99 %v  (%s round trips/s, cpu %s + node %s)\n",
				s.p50, s.p99, si(s.primary), time.Duration(s.cpuPerOp), time.Duration(s.nodeCPUPerOp))
			if tr, ok := byPeer["troupe"]; ok {
				// How close a Troupe ask comes to the bare round trip it
				// rides on, measured in the same minutes.
				fmt.Fprintf(w, "ratio %s-tcp %.2f\n", wl.name, float64(s.p50)/float64(summarize(tr).p50))
			}
		}
		tr, okT := byPeer["troupe"]
		if okT && summarize(tr).base > 0 {
			s := summarize(tr)
			// What replication costs: the replicated rate over the
			// unreplicated one, measured in the same clusters. For
			// handoff-transfer, the member's rate over bulk TCP's.
			fmt.Fprintf(w, "ratio %s %.2f\n", wl.name, s.primary/s.base)
			if strings.HasSuffix(wl.name, "-metrics") {
				// Each round's pair was measured back to back: their
				// spread shows the machine's noise.
				var per []string
				var paired []measurement
				for _, m := range tr {
					per = append(per, strconv.FormatFloat(m.primary/m.base, 'f', 2, 64))
					paired = append(paired, measurement{primary: m.primary / m.base})
				}
				fmt.Fprintf(w, "  cpu per op off/on %.2f\n", s.baseCPU/s.cpuPerOp)
				fmt.Fprintf(w, "  per round %s (median %.2f)\n", strings.Join(per, " "),
					median(paired, func(m measurement) float64 { return m.primary }))
			}
		}
		if okT && wl.name == "continuity-ask" {
			s := summarize(tr)
			fmt.Fprintf(w, "ratio continuity-replay-p50 %.2f\n", float64(s.replayP50)/float64(s.plainP50))
		}
		if okT && wl.name == "handoff-transfer" {
			s := summarize(tr)
			fmt.Fprintf(w, "ratio handoff-ask-p99 %.2f\n", float64(s.p99)/float64(s.idleP99))
		}
		pr, okP := byPeer["protoactor"]
		if !okT || !okP {
			continue
		}
		t, p := summarize(tr), summarize(pr)
		better := func(t, p float64) float64 { return t / p } // rates
		if wl.name == "activate" {
			better = func(t, p float64) float64 { return p / t } // seconds
		}
		fmt.Fprintf(w, "ratio %s %.2f\n", wl.name, better(t.primary, p.primary))
		fmt.Fprintf(w, "  cpu per op protoactor/troupe %.2f\n", p.cpuPerOp/t.cpuPerOp)
		if strings.HasPrefix(wl.name, "remote-") && t.nodeCPUPerOp > 0 {
			fmt.Fprintf(w, "  cpu per op, both processes, protoactor/troupe %.2f\n",
				(p.cpuPerOp+p.nodeCPUPerOp)/(t.cpuPerOp+t.nodeCPUPerOp))
		}
		switch wl.name {
		case "activate":
			fmt.Fprintf(w, "  heap per idle actor protoactor/troupe %.2f\n", p.perActr/t.perActr)
		case "ask", "remote-ask":
			fmt.Fprintf(w, "  p50 latency protoactor/troupe %.2f, p99 %.2f\n", float64(p.p50)/float64(t.p50), float64(p.p99)/float64(t.p99))
		}
		// The same ratio round by round: their spread shows how much the
		// machine's noise moved the figure above.
		var per []string
		var paired []measurement
		for i := range min(len(tr), len(pr)) {
			r := better(tr[i].primary, pr[i].primary)
			per = append(per, strconv.FormatFloat(r, 'f', 2, 64))
			paired = append(paired, measurement{primary: r})
		}
		fmt.Fprintf(w, "  per round %s (median %.2f)\n", strings.Join(per, " "),
			median(paired, func(m measurement) float64 { return m.primary }))
	}
	floors(w, o, results)
}

// floors checks Troupe against the floors in BENCHMARKS.md: the margins
// over Proto.Actor that every change must keep.
func floors(w io.Writer, o options, results map[string]map[string][]measurement) {
	var lines []string
	check := func(name string, ok bool, got string) {
		verdict := "BELOW"
		if ok {
			verdict = "holds"
		}
		lines = append(lines, fmt.Sprintf("  %-34s %-7s %s", name, verdict, got))
	}
	ratioFloor := func(wl string, floor float64) {
		tr, okT := results[wl]["troupe"]
		pr, okP := results[wl]["protoactor"]
		if !okT || !okP {
			return
		}
		t, p := summarize(tr), summarize(pr)
		check(fmt.Sprintf("%s >= %gx protoactor", wl, floor), t.primary >= floor*p.primary, fmt.Sprintf("%.2fx", t.primary/p.primary))
	}
	ratioFloor("tell", 1.5)
	ratioFloor("tell-many", 1.2)
	ratioFloor("ask", 3)
	ratioFloor("pingpong", 6)
	ratioFloor("remote-tell", 3)
	ratioFloor("remote-ask", 2)
	if tr, ok := results["replicated-write"]["troupe"]; ok {
		t := summarize(tr)
		check("replicated-write >= 25k writes/s", t.primary >= 25_000, si(t.primary))
		check("replicated-write >= 0.5x unreplicated", t.primary >= 0.5*t.base, fmt.Sprintf("%.2fx", t.primary/t.base))
	}
	if tr, ok := results["continuity-ask"]["troupe"]; ok {
		t := summarize(tr)
		check("continuity-ask >= 0.7x plain replicated ask", t.primary >= 0.7*t.base, fmt.Sprintf("%.2fx", t.primary/t.base))
		check("replayed ask p50 <= 1.5x plain ask", t.replayP50 <= t.plainP50*3/2, fmt.Sprintf("%.2fx", float64(t.replayP50)/float64(t.plainP50)))
	}
	for _, wl := range []string{"tell-metrics", "ask-metrics"} {
		if tr, ok := results[wl]["troupe"]; ok {
			t := summarize(tr)
			check(wl+" >= 0.95x metrics off", t.primary >= 0.95*t.base, fmt.Sprintf("%.2fx", t.primary/t.base))
		}
	}
	if tr, ok := results["handoff-transfer"]["troupe"]; ok {
		t := summarize(tr)
		check("handoff-transfer >= 0.5x bulk TCP", t.primary >= 0.5*t.base, fmt.Sprintf("%.2fx", t.primary/t.base))
		check("handoff ask p99 <= 2x idle", t.p99 <= 2*t.idleP99, fmt.Sprintf("%.2fx", float64(t.p99)/float64(t.idleP99)))
	}
	if tr, ok := results["activate"]["troupe"]; ok {
		t := summarize(tr)
		check("idle actor <= 300 B heap", t.perActr <= 300, fmt.Sprintf("%.0f B", t.perActr))
		if o.sz.ActivateKeys == 1_000_000 {
			check("1M activations <= 2 s", t.primary <= 2, fmt.Sprintf("%.3f s", t.primary))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintln(w, "floors (troupe):")
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
}

// short rounds d to three or four significant digits.
func short(d time.Duration) time.Duration {
	for unit := time.Duration(1); unit < time.Second; unit *= 10 {
		if d < 1000*unit {
			return d.Round(unit)
		}
	}
	return d.Round(time.Millisecond)
}

// si prints a rate with a k or M suffix.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
