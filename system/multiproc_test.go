package system_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/proctest"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/system"
)

// The tests in this file run members as separate processes (see
// internal/proctest), in the role "member": a child starts a clustered
// system hosting the test counter (whose replies name the serving
// member), prints
//
//	ready <addr> <addr#incarnation>
//
// once it has joined, and closes when its stdin does (or dies by kill -9).
// The parent reaches the cluster through a client.Client.

const (
	envMemberAddr   = "TROUPE_SYSTEM_MEMBER_ADDR"   // address to listen on and advertise
	envMemberSeeds  = "TROUPE_SYSTEM_MEMBER_SEEDS"  // comma-separated
	envMemberDetect = "TROUPE_SYSTEM_MEMBER_DETECT" // "fast" (the default), "never" or "default"
	// envMemberLog, set in the test's environment, makes members log at
	// Info to their stderr, which tests print when they fail.
	envMemberLog = "TROUPE_SYSTEM_MEMBER_LOG"
)

const procClusterName = "procs"

// Failure detection for the members of a test. "never" takes longer than
// any wait of a test (systemtest.Limit): what such a test sees happen, it
// sees without failure detection.
const (
	detectFast    = "fast"
	detectNever   = "never"
	detectDefault = "default" // cluster.DefaultTimings
)

func timingsFor(detect string) cluster.Timings {
	if detect == detectDefault {
		return cluster.DefaultTimings()
	}
	tm := cluster.FastTimings()
	if detect == detectNever {
		tm.SuspectAfter = 6 * systemtest.Limit
		tm.DeadAfter = 6 * systemtest.Limit
		tm.RemoveAfter = 12 * systemtest.Limit
	}
	return tm
}

// runMember is the body of a member process.
func runMember() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "member:", err)
		return 2
	}
	cc := cluster.FastConfig(os.Getenv(envMemberAddr))
	cc.ClusterName = procClusterName
	cc.Timings = timingsFor(os.Getenv(envMemberDetect))
	if s := os.Getenv(envMemberSeeds); s != "" {
		cc.Seeds = strings.Split(s, ",")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scfg := system.Config{Actors: []actor.Definition{ccounter}, Cluster: &cc, LeaveTimeout: 2 * time.Second}
	if os.Getenv(envMemberLog) != "" {
		scfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := system.Start(ctx, scfg)
	if err != nil {
		return fail(err)
	}
	recordNodes([]*system.System{s})
	id := ""
	for _, m := range s.Members() {
		if m.ID.Addr == s.Addr() {
			id = m.ID.String()
		}
	}
	fmt.Printf("ready %s %s\n", s.Addr(), id)
	// The parent closes stdin to stop this process (or it kills it).
	io.Copy(io.Discard, os.Stdin)
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := s.Close(cctx); err != nil {
		return fail(err)
	}
	return 0
}

// spawnMember starts a member process listening at addr.
func spawnMember(t *testing.T, addr string, seeds []string, detect string) *proctest.Proc {
	t.Helper()
	return proctest.Start(t, proctest.Spec{Role: "member", Env: []string{
		envMemberAddr + "=" + addr, envMemberSeeds + "=" + strings.Join(seeds, ","), envMemberDetect + "=" + detect,
	}})
}

// memberID waits until p has joined and returns its id.
func memberID(t *testing.T, p *proctest.Proc) string {
	t.Helper()
	return p.WaitLine(t, "ready ", systemtest.Limit)[1]
}

// ringOwner places typ/key on the members as a client with that member
// list does: the ring of the members that host typ and have not left,
// skipping the dead.
func ringOwner(members []cluster.Member, typ, key string) (string, error) {
	var ms []ring.NodeID
	status := map[ring.NodeID]cluster.Status{}
	for _, m := range members {
		if m.Status == cluster.StatusLeft || !slices.Contains(m.ActorTypes, typ) {
			continue
		}
		rm := m.ID
		ms = append(ms, rm)
		status[rm] = m.Status
	}
	slices.SortFunc(ms, ring.NodeID.Compare)
	r := ring.New(ms)
	o, err := r.Owner(ring.KeyToken(typ, key), r.Len(), func(m ring.NodeID) bool {
		return status[m] == cluster.StatusAlive || status[m] == cluster.StatusSuspect
	})
	return o.Addr, err
}

// memberCluster is n member processes on loopback and a client.
type memberCluster struct {
	t     *testing.T
	ctx   context.Context
	bound time.Duration
	addrs []string
	procs []*proctest.Proc
	ids   []string
	// detect is the members' failure detection (detectFast or detectNever).
	detect string
	c      *client.Client
	keys   []string
	why    sync.Map // key index -> the last failure, for reports
}

// startMemberCluster starts n member processes with the failure
// detection detect, and a client that sees them all alive.
func startMemberCluster(t *testing.T, n, nkeys int, detect string) *memberCluster {
	t.Helper()
	mc := &memberCluster{t: t, ctx: t.Context(), bound: systemtest.Limit, addrs: proctest.FreeLoopback(t, n),
		procs: make([]*proctest.Proc, n), ids: make([]string, n), detect: detect}
	start := time.Now()
	for i := range n {
		mc.procs[i] = spawnMember(t, mc.addrs[i], mc.seedsFor(i), detect)
	}
	for i, p := range mc.procs {
		mc.ids[i] = memberID(t, p)
	}
	cctx, cancel := context.WithTimeout(mc.ctx, mc.bound)
	defer cancel()
	c, err := client.New(cctx, client.Config{ClusterName: procClusterName, Seeds: mc.addrs, SyncInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mc.c = c
	t.Cleanup(func() { c.Close() })
	mc.waitClientSees()
	t.Logf("%d member processes joined and the client saw them alive %v after spawning", n, time.Since(start).Round(time.Millisecond))
	for i := range nkeys {
		mc.keys = append(mc.keys, "proc-"+strconv.Itoa(i))
	}
	return mc
}

// seedsFor is member i's seed list: one list for every member, whose
// smallest address starts the cluster (see cluster.Config.Seeds).
func (mc *memberCluster) seedsFor(int) []string { return mc.addrs }

// waitClientSees waits until the client sees exactly the current
// processes alive.
func (mc *memberCluster) waitClientSees() {
	mc.t.Helper()
	systemtest.WaitUntil(mc.t, fmt.Sprintf("the client to see %v alive", mc.ids), func() bool {
		var alive []string
		for _, m := range mc.c.Members() {
			if m.Status == cluster.StatusAlive {
				alive = append(alive, m.ID.String())
			}
		}
		for _, id := range mc.ids {
			if !slices.Contains(alive, id) {
				return false
			}
		}
		return len(alive) == len(mc.ids)
	})
}

func (mc *memberCluster) ask(key string, d time.Duration) (CountReply, error) {
	ctx, cancel := context.WithTimeout(mc.ctx, d)
	defer cancel()
	return actor.Ask(ctx, ccounter.Ref(mc.c, key), Get{})
}

// serveAll polls every key until it is answered by its ring owner in the
// client's view, that owner satisfying okOwner, and returns when each key
// was (the zero time for those never served).
func (mc *memberCluster) serveAll(okOwner func(i int, node string) bool) []time.Time {
	return pollKeys(len(mc.keys), mc.bound, func(i int) bool {
		got, err := mc.ask(mc.keys[i], 300*time.Millisecond)
		if err != nil {
			mc.why.Store(i, err.Error())
			return false
		}
		want, err := ringOwner(mc.c.Members(), "ccounter", mc.keys[i])
		if err != nil || got.Node != want || !okOwner(i, got.Node) {
			mc.why.Store(i, fmt.Sprintf("served by %s, the client's ring says %s (%v)", got.Node, want, err))
			return false
		}
		return true
	})
}

// mustAll fails the test unless every key was served, and returns how long
// after since the last one was.
func (mc *memberCluster) mustAll(what string, at []time.Time, since time.Time) time.Duration {
	mc.t.Helper()
	d, ok := latest(at, since)
	if ok {
		return d
	}
	var missing []string
	for i, a := range at {
		if a.IsZero() {
			w, _ := mc.why.Load(i)
			o, _ := ringOwner(mc.c.Members(), "ccounter", mc.keys[i])
			missing = append(missing, fmt.Sprintf("%s (the client places it on %s): %v", mc.keys[i], o, w))
		}
	}
	var errs []string
	for i, p := range mc.procs {
		errs = append(errs, mc.addrs[i]+": "+p.Stderr())
	}
	var view []string
	for _, m := range mc.c.Members() {
		view = append(view, fmt.Sprintf("%s:%s", m.ID, m.Status))
	}
	mc.t.Fatalf("%s: not every key served within %v:\n  %s\nthe client sees %v\nmembers' stderr: %s", what, mc.bound, strings.Join(missing, "\n  "), view, strings.Join(errs, "\n"))
	return 0
}

// restart starts process i again at its address (kill it first) and
// waits until it has joined with a new incarnation and the client sees it.
func (mc *memberCluster) restart(i int) {
	mc.t.Helper()
	old := mc.ids[i]
	mc.procs[i] = spawnMember(mc.t, mc.addrs[i], mc.seedsFor(i), mc.detect)
	mc.ids[i] = memberID(mc.t, mc.procs[i])
	if mc.ids[i] == old {
		mc.t.Fatalf("expected a new incarnation at %s, got %s again", mc.addrs[i], old)
	}
	mc.waitClientSees()
}

// checkOwnsItsKeys checks that the keys the client's ring places on
// process i are answered by it, and returns how many there are.
func (mc *memberCluster) checkOwnsItsKeys(i int) int {
	mc.t.Helper()
	var mine []string
	for _, key := range mc.keys {
		if o, _ := ringOwner(mc.c.Members(), "ccounter", key); o == mc.addrs[i] {
			mine = append(mine, key)
		}
	}
	if len(mine) == 0 {
		mc.t.Fatalf("the restarted member %s owns no key of %d", mc.ids[i], len(mc.keys))
	}
	for _, key := range mine {
		got, err := mc.ask(key, mc.bound)
		if err != nil || got.Node != mc.addrs[i] {
			mc.t.Errorf("%s: placed on the restarted member %s, answered %+v, %v", key, mc.ids[i], got, err)
		}
	}
	return len(mine)
}

// TestMemberProcessesKilledAndRestartedServeEveryKey runs three member
// processes and a client: every key is answered by its ring owner; after
// kill -9 of one member every key is answered again, by a survivor,
// within a bound; the killed member restarted at the same address (a new
// incarnation) rejoins and answers the keys placed on it.
func TestMemberProcessesKilledAndRestartedServeEveryKey(t *testing.T) {
	const n, nkeys = 3, 60
	tm := cluster.FastTimings()
	start := time.Now()
	mc := startMemberCluster(t, n, nkeys, detectFast)
	ctx, bound, c, keys, addrs := mc.ctx, mc.bound, mc.c, mc.keys, mc.addrs

	// Every key on its owner; remember where each lives.
	served := make([]string, nkeys)
	at := mc.serveAll(func(i int, node string) bool {
		served[i] = node
		return true
	})
	mc.mustAll("before the kill", at, start)
	victim := n - 1
	var moved []int
	for i, node := range served {
		if node == addrs[victim] {
			moved = append(moved, i)
		}
	}
	if len(moved) == 0 {
		t.Fatalf("no key of %d placed on %s: %v", nkeys, addrs[victim], served)
	}

	// An ask waiting on the victim when it dies fails fast with
	// ErrUnavailable, once the client learns the owner is dead, rather
	// than at its deadline.
	stallErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		_, err := actor.Ask(ctx, ccounter.Ref(c, keys[moved[0]]), Stall{ID: t.Name()})
		stallErr <- err
	}()
	// The stall holds the key once an ask behind it cannot be answered:
	// until then, asks on the key are (the stall may still be on its way).
	systemtest.WaitUntil(t, "the stall to hold "+keys[moved[0]], func() bool {
		_, err := mc.ask(keys[moved[0]], 200*time.Millisecond)
		return errors.Is(err, context.DeadlineExceeded)
	})

	// kill -9: the keys of the victim move to the survivors.
	killed := time.Now()
	mc.procs[victim].Kill()
	// The survivors' keys stay served throughout.
	var undisturbed sync.WaitGroup
	var survivorErrs []string
	var errMu sync.Mutex
	for i, node := range served {
		if node != addrs[victim] {
			undisturbed.Go(func() {
				got, err := mc.ask(keys[i], bound)
				if err != nil || got.Node != node {
					errMu.Lock()
					survivorErrs = append(survivorErrs, fmt.Sprintf("%s (on survivor %s): %+v, %v", keys[i], node, got, err))
					errMu.Unlock()
				}
			})
		}
	}
	firstMoved := pollKeys(len(moved), bound, func(j int) bool {
		got, err := mc.ask(keys[moved[j]], 300*time.Millisecond)
		return err == nil && got.Node != addrs[victim]
	})
	err := systemtest.Recv(t, stallErr, "the ask waiting on the killed member")
	stallFailed := time.Since(killed)
	if !errors.Is(err, actor.ErrUnavailable) {
		t.Errorf("the ask waiting on the killed member: err = %v after %v, want ErrUnavailable", err, stallFailed.Round(time.Millisecond))
	}
	undisturbed.Wait()
	for _, e := range survivorErrs {
		t.Errorf("expected the survivors' keys to stay served through the kill: %s", e)
	}
	at = mc.serveAll(func(_ int, node string) bool { return node != addrs[victim] })
	all := mc.mustAll("after kill -9", at, killed)
	first := time.Duration(-1)
	for _, a := range firstMoved {
		if !a.IsZero() && (first < 0 || a.Sub(killed) < first) {
			first = a.Sub(killed)
		}
	}
	lastMoved, _ := latest(firstMoved, killed)
	t.Logf("kill -9 of %s (%d of %d keys on it; heartbeat %v, suspect %v, dead %v): moved keys answered again %v (first) to %v (last) after the kill; every key checked on its new owner %v after (SuspectAfter + DeadAfter = %v); an ask waiting on it failed %v after the kill",
		addrs[victim], len(moved), nkeys, tm.Heartbeat, tm.SuspectAfter, tm.DeadAfter, first.Round(time.Millisecond), lastMoved.Round(time.Millisecond), all.Round(time.Millisecond), tm.SuspectAfter+tm.DeadAfter, stallFailed.Round(time.Millisecond))
	mc.procs[victim].Kill()

	// Restart at the same address: a new incarnation rejoins and serves
	// the keys the ring places on it.
	restarted := time.Now()
	mc.restart(victim)
	at = mc.serveAll(func(int, string) bool { return true })
	rejoined := mc.mustAll("after the restart", at, restarted)
	mine := mc.checkOwnsItsKeys(victim)
	t.Logf("restart of %s as %s: every key answered by its owner %v after the restart; %d keys on the restarted member",
		addrs[victim], mc.ids[victim], rejoined.Round(time.Millisecond), mine)
}

// TestMemberProcessKilledAndRestartedAtOnceTakesItsKeysBack kills a member
// and restarts it at the same address: the new incarnation replaces the
// old one (which is marked left at once), so the keys are served again,
// by the new process, without waiting for failure detection. The members
// never detect a failure within the test's bounds (detectNever): every
// key served again within them was served without it.
func TestMemberProcessKilledAndRestartedAtOnceTakesItsKeysBack(t *testing.T) {
	const n, nkeys = 3, 60
	mc := startMemberCluster(t, n, nkeys, detectNever)
	start := time.Now()
	mc.mustAll("before the kill", mc.serveAll(func(int, string) bool { return true }), start)
	victim := n - 1
	old := mc.ids[victim]
	killed := time.Now()
	mc.procs[victim].Kill()
	mc.restart(victim)
	for _, m := range mc.c.Members() {
		if m.ID.String() == old && m.Status != cluster.StatusLeft {
			t.Errorf("expected the replaced incarnation %s to be left once its successor joined, the client sees it %v", old, m.Status)
		}
	}
	at := mc.serveAll(func(int, string) bool { return true })
	mc.mustAll("after the restart, without failure detection", at, killed)
	mc.checkOwnsItsKeys(victim)
}

// TestMemberProcessLeavingInOrderLosesNoAsk stops a member in order (its
// Close leaves the cluster and hands its keys over) while the client keeps
// asking every key: no ask may fail, and afterwards every key is answered
// by a survivor, without waiting for failure detection (the members never
// detect a failure within the test's bounds: detectNever).
func TestMemberProcessLeavingInOrderLosesNoAsk(t *testing.T) {
	const n, nkeys = 3, 30
	mc := startMemberCluster(t, n, nkeys, detectNever)
	start := time.Now()
	mc.mustAll("before the leave", mc.serveAll(func(int, string) bool { return true }), start)
	victim := n - 1
	stop := make(chan struct{})
	var mu sync.Mutex
	var failed []string
	asks := 0
	var wg sync.WaitGroup
	for i, key := range mc.keys {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				at := time.Now()
				_, err := mc.ask(key, 2*time.Second)
				mu.Lock()
				asks++
				if err != nil && len(failed) < 20 {
					failed = append(failed, fmt.Sprintf("%s (key %d) at +%v: %v", key, i, at.Sub(start).Round(time.Millisecond), err))
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	left := time.Now()
	if err := mc.procs[victim].Stop(); err != nil { // the member Closes, leaving in order
		t.Errorf("the leaving member exited with %v: %s", err, mc.procs[victim].Stderr())
	}
	at := mc.serveAll(func(_ int, node string) bool { return node != mc.addrs[victim] })
	close(stop)
	wg.Wait()
	mc.mustAll("after the leave, without failure detection", at, left)
	for _, f := range failed {
		t.Errorf("expected no ask to fail while a member leaves in order: %s", f)
	}
	if asks == 0 {
		t.Error("expected asks during the leave, there were none")
	}
}

// TestClientSurvivesAFullClusterRestart kills every member process and
// starts them all again at the same addresses (new incarnations): the
// client, which stays up, must learn the new cluster and serve every key
// again, each by its owner.
func TestClientSurvivesAFullClusterRestart(t *testing.T) {
	const n, nkeys = 3, 30
	mc := startMemberCluster(t, n, nkeys, detectFast)
	start := time.Now()
	mc.mustAll("before the restart", mc.serveAll(func(int, string) bool { return true }), start)
	killed := time.Now()
	for _, p := range mc.procs {
		p.Kill()
	}
	old := slices.Clone(mc.ids)
	for i := range mc.procs {
		mc.procs[i] = spawnMember(t, mc.addrs[i], mc.seedsFor(i), mc.detect)
	}
	for i, p := range mc.procs {
		mc.ids[i] = memberID(t, p)
		if mc.ids[i] == old[i] {
			t.Fatalf("expected a new incarnation at %s, got %s again", mc.addrs[i], old[i])
		}
	}
	restarted := time.Since(killed)
	at := mc.serveAll(func(int, string) bool { return true })
	back := mc.mustAll("after the full restart", at, killed)
	mc.waitClientSees()
	t.Logf("every member killed and restarted (the new cluster joined %v after the kill): the client served every key on its owner %v after the kill",
		restarted.Round(time.Millisecond), back.Round(time.Millisecond))
}
