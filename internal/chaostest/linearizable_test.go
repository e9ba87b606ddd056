package chaostest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/internal/lincheck"
	"github.com/troupe-go/troupe/internal/netns"
	"github.com/troupe-go/troupe/internal/proctest"
	"github.com/troupe-go/troupe/internal/replicastore"
)

// settings reads the run's length, seed and trials from the environment.
func settings(t *testing.T) (d time.Duration, seed uint64, trials int) {
	d, trials = 12*time.Second, 1
	if s := os.Getenv("TROUPE_CHAOS_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("TROUPE_CHAOS_DURATION=%q: %v", s, err)
		}
	}
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("TROUPE_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TROUPE_CHAOS_SEED=%q: %v", s, err)
		}
	}
	if s := os.Getenv("TROUPE_CHAOS_TRIALS"); s != "" {
		var err error
		if trials, err = strconv.Atoi(s); err != nil || trials < 1 {
			t.Fatalf("TROUPE_CHAOS_TRIALS=%q: want a positive count", s)
		}
	}
	return d, seed, trials
}

// hostDialer opens the client's connections from inside its lab host:
// nothing dials a lab address from the test's own namespace.
type hostDialer struct{ h *netns.Host }

func (d hostDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.h.Dial(ctx, network, addr)
}

// labCluster is five member processes, each in its own lab host with
// its own data directory, and a client in a sixth host.
type labCluster struct {
	t     *testing.T
	lab   *netns.Lab
	addrs []string
	dirs  []string
	procs []*proctest.Proc
	c     *client.Client
	// started counts the member processes started, naming their logs.
	started atomic.Int32
}

const members = 5

func startLabCluster(t *testing.T) *labCluster {
	t.Helper()
	lab := netns.New(t.Context(), t, netns.Config{Hosts: members + 1})
	lc := &labCluster{t: t, lab: lab, procs: make([]*proctest.Proc, members)}
	for i := range members {
		lc.addrs = append(lc.addrs, netip.AddrPortFrom(lab.Host(i).Addr, 7400).String())
		lc.dirs = append(lc.dirs, filepath.Join(t.TempDir(), "member"+strconv.Itoa(i)))
	}
	for i := range members {
		lc.start(i)
	}
	for i := range members {
		lc.procs[i].WaitLine(t, "ready ", time.Minute)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, client.Config{ClusterName: clusterName, Seeds: lc.addrs,
		Dialer: hostDialer{lab.Host(members)}, SyncInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lc.c = c
	t.Cleanup(func() { c.Close() })
	if _, err := c.WaitAlive(ctx, members); err != nil {
		t.Fatalf("the client did not see %d members alive: %v", members, err)
	}
	return lc
}

// start starts member i in its host, on its data directory.
func (lc *labCluster) start(i int) {
	// One seed list for every member: its smallest address starts the
	// cluster, the others wait for it (see cluster.Config.Seeds).
	env := []string{envAddr + "=" + lc.addrs[i], envSeeds + "=" + strings.Join(lc.addrs, ","), envDataDir + "=" + lc.dirs[i]}
	if os.Getenv(envLog) != "" {
		env = append(env, envLog+"=1")
	}
	p := proctest.Start(lc.t, proctest.Spec{Role: "member", Env: env,
		Prefix: []string{"ip", "netns", "exec", lc.lab.Host(i).NS}})
	lc.procs[i] = p
	if os.Getenv(envLog) != "" {
		// What a failed run's members logged is kept for reading after.
		name := fmt.Sprintf("member%d-%d.log", i, lc.started.Add(1))
		lc.t.Cleanup(func() {
			if !lc.t.Failed() {
				return
			}
			path := filepath.Join(os.TempDir(), "troupe-chaos-"+strconv.FormatInt(time.Now().Unix(), 10)+"-"+name)
			if err := os.WriteFile(path, []byte(p.Stderr()), 0o644); err == nil {
				lc.t.Logf("member %d's log: %s", i, path)
			}
		})
	}
}

// TestRegistersStayLinearizableUnderANemesis runs clients over a few
// dozen replicated registers (3 replicas, Majority) on five member
// processes while a seeded nemesis kills members with SIGKILL and
// restarts them on their data directories, pauses one with SIGSTOP past
// DeadAfter, and partitions the members 2|3 and 1|4. Every history must be
// linearizable per register; the final reads on a healed cluster make
// every acknowledged write that was lost show up as a violation.
func TestRegistersStayLinearizableUnderANemesis(t *testing.T) {
	d, seed, trials := settings(t)
	for trial := range trials {
		s := seed + uint64(trial)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { runTrial(t, d, s) })
	}
}

func runTrial(t *testing.T, d time.Duration, seed uint64) {
	lc := startLabCluster(t)
	rng := rand.New(rand.NewPCG(seed, 0x6368616f73))
	const (
		registers = 24
		clients   = 8
		opTimeout = 2 * time.Second
	)
	refs := make([]actor.Ref[regMsg], registers)
	for i := range refs {
		refs[i] = register.Ref(lc.c, "reg-"+strconv.Itoa(i))
	}
	h := lincheck.NewHistory[string]()
	var acked atomic.Int64 // operations that completed with an answer
	var next atomic.Int64  // distinct written values
	var lastErr atomic.Pointer[error]
	op := func(r *rand.Rand, i int, kind lincheck.Op) bool {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		in := lincheck.Input[string]{Key: refs[i].Key(), Op: kind}
		call := h.Now()
		var out lincheck.Output
		var err error
		switch kind {
		case lincheck.Read:
			out.Value, err = actor.Ask(ctx, refs[i], regRead{})
		case lincheck.Write:
			in.New = int(next.Add(1))
			_, err = actor.Ask(ctx, refs[i], regWrite{V: in.New})
		case lincheck.CAS:
			in.Old, in.New = r.IntN(int(next.Load())+1), int(next.Add(1))
			out.OK, err = actor.Ask(ctx, refs[i], regCAS{Old: in.Old, New: in.New})
		}
		if err != nil {
			lastErr.Store(&err)
			if kind == lincheck.Read {
				return false // a failed read has no effect to check
			}
			out.Unknown = true
			h.Add(in, out, call, lincheck.Pending)
			return false
		}
		h.Add(in, out, call, h.Now())
		acked.Add(1)
		return true
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		r := rand.New(rand.NewPCG(seed, uint64(c)))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				kind := lincheck.Read
				switch p := r.IntN(10); {
				case p >= 7:
					kind = lincheck.CAS
				case p >= 4:
					kind = lincheck.Write
				}
				if !op(r, r.IntN(registers), kind) {
					// A failed operation's outcome is unknown: each one
					// widens porcupine's search, so a client backs off
					// rather than pile them up while a fault lasts.
					pause := time.NewTimer(50 * time.Millisecond)
					select {
					case <-pause.C:
					case <-stop:
						pause.Stop()
						return
					}
				}
			}
		})
	}

	faults := lc.nemesis(rng, d, kinds(t))
	close(stop)
	wg.Wait()
	lc.healAll()

	// Every register once more on the healed cluster: a write that was
	// acknowledged and then lost makes this read illegal. A key whose
	// replica sets (the ring's, or the one before its last change) hold
	// members the nemesis killed may stay unacquirable until the ring
	// changes again, at the latest when they are removed (RemoveAfter:
	// docs/replication.md, "Formation"): that is the bound asserted.
	healed := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), timings().RemoveAfter+2*time.Minute)
	defer cancel()
	if _, err := lc.c.WaitAlive(ctx, members); err != nil {
		t.Fatalf("the healed cluster did not come back: %v", err)
	}
	for i := range refs {
		for !op(rng, i, lincheck.Read) {
			if ctx.Err() != nil {
				var last error
				if e := lastErr.Load(); e != nil {
					last = *e
				}
				t.Fatalf("register %d could not be read on the healed cluster within %v (seed %d, faults %v): %v", i, time.Since(healed), seed, faults, last)
			}
		}
	}
	ops := h.Ops()
	t.Logf("seed %d: faults %v; %d operations, %d answered; every register read %v after healing", seed, faults, len(ops), acked.Load(), time.Since(healed).Round(time.Millisecond))
	if acked.Load() < int64(registers)*4 {
		t.Fatalf("only %d operations answered: the cluster made no progress under the nemesis", acked.Load())
	}
	res, info := porcupine.CheckOperationsVerbose(lincheck.Model[string](), ops, 2*time.Minute)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		if name, err := lincheck.Draw[string](info, fmt.Sprintf("troupe-chaos-%d-*.html", seed)); err == nil {
			t.Logf("history drawn in %s", name)
		}
		explain(t, ops, seed)
		t.Fatalf("the history is not linearizable (TROUPE_CHAOS_SEED=%d)", seed)
	default:
		t.Logf("porcupine could not decide within its time limit")
	}
}

// faultKinds are the nemesis's kinds of fault, in the order of its draw.
var faultKinds = []string{"kill", "pause", "partition"}

// powerLoss is the kind of fault that replaces kills with power losses:
// a killed member's store is left as a restart of the machine finds it
// (replicastore.PowerLoss), so it restarts receiving the whole ring.
const powerLoss = "powerloss"

// kinds reads TROUPE_CHAOS_FAULTS, a comma-separated subset of
// faultKinds that narrows a run to the faults it names (to reproduce a
// rare failure more often), or powerLoss; faultKinds when unset.
func kinds(t *testing.T) []string {
	s := os.Getenv("TROUPE_CHAOS_FAULTS")
	if s == "" {
		return faultKinds
	}
	var ks []string
	for k := range strings.SplitSeq(s, ",") {
		if !slices.Contains(faultKinds, k) && k != powerLoss {
			t.Fatalf("TROUPE_CHAOS_FAULTS=%q: %q is not one of %v or %s", s, k, faultKinds, powerLoss)
		}
		ks = append(ks, k)
	}
	if slices.Contains(ks, powerLoss) && !slices.Contains(ks, "kill") {
		ks = append(ks, "kill")
	}
	return ks
}

// nemesis injects faults of the given kinds for d, one at a time with a
// quiet second between them, and counts them by kind.
func (lc *labCluster) nemesis(rng *rand.Rand, d time.Duration, kinds []string) map[string]int {
	t := lc.t
	ctx := t.Context()
	faults := map[string]int{}
	hold := 3 * timings().DeadAfter
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		quiet := time.NewTimer(time.Second)
		<-quiet.C
		// Four draws: kill, pause, and the two partitions; a kind left
		// out is drawn again.
		f := rng.IntN(4)
		for !slices.Contains(kinds, faultKinds[min(f, 2)]) {
			f = rng.IntN(4)
		}
		switch f {
		case 0: // kill -9 and restart on the same data directory
			i := rng.IntN(members)
			lc.procs[i].Kill()
			<-lc.procs[i].Exited()
			kind := "kill"
			if slices.Contains(kinds, powerLoss) {
				if err := replicastore.PowerLoss(lc.dirs[i]); err != nil {
					t.Fatal(err)
				}
				kind = powerLoss
			}
			lc.start(i)
			lc.procs[i].WaitLine(t, "ready ", time.Minute)
			faults[kind]++
		case 1: // pause past DeadAfter, then resume
			i := rng.IntN(members)
			if err := lc.procs[i].Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			sleepFor(hold)
			if err := lc.procs[i].Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			faults["pause"]++
		default: // partition 2|3 (f == 2) or 1|4 (f == 3)
			perm := rng.Perm(members)
			small := 2
			if f == 3 {
				small = 1
			}
			var a, b []*netns.Host
			for j, i := range perm {
				if j < small {
					a = append(a, lc.lab.Host(i))
				} else {
					b = append(b, lc.lab.Host(i))
				}
			}
			if err := lc.lab.Partition(ctx, a, b); err != nil {
				t.Fatal(err)
			}
			sleepFor(hold)
			if err := lc.lab.Heal(ctx); err != nil {
				t.Fatal(err)
			}
			faults[fmt.Sprintf("partition %d|%d", small, members-small)]++
		}
	}
	return faults
}

// healAll resumes every member and removes every rule.
func (lc *labCluster) healAll() {
	for _, p := range lc.procs {
		_ = p.Signal(syscall.SIGCONT)
	}
	if err := lc.lab.Heal(lc.t.Context()); err != nil && !errors.Is(err, context.Canceled) {
		lc.t.Fatal(err)
	}
}

// sleepFor lets a fault last d: the nemesis's schedule is time itself.
func sleepFor(d time.Duration) {
	tm := time.NewTimer(d)
	<-tm.C
}

// explain writes, for each register whose history alone is not
// linearizable, its operations in call order (times from the start of the
// run), next to the drawing, and names the file.
func explain(t *testing.T, ops []porcupine.Operation, seed uint64) {
	model := lincheck.Model[string]()
	for _, part := range model.Partition(ops) {
		if porcupine.CheckOperations(model, part) {
			continue
		}
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		key := part[0].Input.(lincheck.Input[string]).Key
		var b strings.Builder
		for _, op := range part {
			ret := "unknown"
			if op.Return != lincheck.Pending {
				ret = time.Duration(op.Return).String()
			}
			fmt.Fprintf(&b, "%v .. %s  %s\n", time.Duration(op.Call), ret, model.DescribeOperation(op.Input, op.Output))
		}
		name := filepath.Join(os.TempDir(), fmt.Sprintf("troupe-chaos-%d-%s.txt", seed, key))
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err == nil {
			t.Logf("register %s is not linearizable: its operations are in %s", key, name)
		}
	}
}
