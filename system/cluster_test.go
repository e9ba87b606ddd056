package system_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// The clustered test actor: a counter that can also stall, fail, and ask
// another counter.
type CMsg interface{ cmsg() }

type Add struct{ N int }

type Get struct {
	actor.Reply[CMsg, CountReply]
}

// CountReply says who counted what, so tests see where a key lives.
type CountReply struct {
	Count int
	Node  string
}

// Stall blocks until the asker gives up and reports the handler's context
// ending through the process-wide stalls channel.
type Stall struct {
	actor.Reply[CMsg, string]
	ID string
}

type Fail struct {
	actor.Reply[CMsg, string]
}

// Relay asks counter To, which may ask back: for cycle detection.
type Relay struct {
	actor.Reply[CMsg, string]
	To    []string // the remaining hops
	Stall bool
}

func (Add) cmsg()   {}
func (Get) cmsg()   {}
func (Stall) cmsg() {}
func (Fail) cmsg()  {}
func (Relay) cmsg() {}

var stalls = struct {
	sync.Mutex
	ended   map[string]chan struct{}
	started map[string]chan struct{}
}{ended: map[string]chan struct{}{}, started: map[string]chan struct{}{}}

var stallSeq atomic.Int64

// stallID returns an ID no other stall uses, even across -count runs.
func stallID(t *testing.T) string { return fmt.Sprintf("%s#%d", t.Name(), stallSeq.Add(1)) }

func stallEnded(id string) chan struct{} { return stallSignal(stalls.ended, id) }

// stallStarted is closed once a stall's handler runs. (A key's activation
// alone does not say so: an ask claimed to run inline on the receiving
// goroutine, or queued, is not running yet, and a cancel drops it unseen.)
func stallStarted(id string) chan struct{} { return stallSignal(stalls.started, id) }

func stallSignal(m map[string]chan struct{}, id string) chan struct{} {
	stalls.Lock()
	defer stalls.Unlock()
	ch, ok := m[id]
	if !ok {
		ch = make(chan struct{})
		m[id] = ch
	}
	return ch
}

// ccounter is set in init: its handler refers to it.
var ccounter *actor.Def[int, CMsg]

func init() {
	ccounter = actor.Define("ccounter", handleC).WithMessages(Add{}, Get{}, Stall{}, Fail{}, Relay{})
}

func handleC(c *actor.Context[int, CMsg], m CMsg) error {
	switch m := m.(type) {
	case Add:
		c.SetState(c.State() + m.N)
	case Get:
		return actor.Respond(c, m, CountReply{Count: c.State(), Node: nodeName(c)})
	case Stall:
		if ch := stallStarted(m.ID); ch != nil {
			select {
			case <-ch: // sent again elsewhere
			default:
				close(ch)
			}
		}
		<-c.Done()
		// A stall sent again elsewhere (its first owner left) ends twice.
		stalls.Lock()
		select {
		case <-stalls.ended[m.ID]:
		default:
			if ch, ok := stalls.ended[m.ID]; ok {
				close(ch)
			} else {
				ch = make(chan struct{})
				close(ch)
				stalls.ended[m.ID] = ch
			}
		}
		stalls.Unlock()
	case Fail:
		return errors.New("asked to fail")
	case Relay:
		if len(m.To) == 0 {
			return actor.Respond(c, m, "end")
		}
		r, err := actor.Ask(c, ccounter.Ref(c.System(), m.To[0]), Relay{To: m.To[1:]})
		if err != nil {
			return err
		}
		return actor.Respond(c, m, r)
	}
	return nil
}

// hostMark is hosted by no system: its refs in one system are equal to
// each other and to no other system's, so they key per-system maps.
var hostMark = actor.Define("host-mark", func(*actor.Context[struct{}, struct{}], struct{}) error { return nil })

// hostID identifies the runtime behind sys.
func hostID(sys actor.System) any { return hostMark.Ref(sys, "h") }

// nodeName names the node a handler runs on: its address, from the pinned
// lookup the test registers per system.
func nodeName(c *actor.Context[int, CMsg]) string {
	nodes.Lock()
	defer nodes.Unlock()
	return nodes.byHost[hostID(c.System())]
}

var nodes = struct {
	sync.Mutex
	byHost map[any]string
}{byHost: map[any]string{}}

// recordNodes records each system's address for nodeName.
func recordNodes(systems []*system.System) {
	nodes.Lock()
	defer nodes.Unlock()
	for _, s := range systems {
		nodes.byHost[hostID(s)] = s.Addr()
	}
}

// startCluster starts n members hosting the test counter (and defs), and
// records each one's address for nodeName.
func startCluster(t *testing.T, n int, defs ...actor.Definition) []*system.System {
	t.Helper()
	systems := systemtest.StartCluster(t, n, func(_ int, cfg *system.Config) { cfg.LeaveTimeout = 2 * time.Second },
		append([]actor.Definition{ccounter}, defs...)...)
	recordNodes(systems)
	return systems
}

// startClusterCrashable is startCluster with member victim on net, so
// that the test can crash it (systemtest.Crash).
func startClusterCrashable(t *testing.T, n, victim int, net *systemtest.Net, defs ...actor.Definition) []*system.System {
	t.Helper()
	systems := systemtest.StartCluster(t, n, func(i int, cfg *system.Config) {
		cfg.LeaveTimeout = 2 * time.Second
		if i == victim {
			net.Attach(t, cfg)
		}
	}, append([]actor.Definition{ccounter}, defs...)...)
	recordNodes(systems)
	return systems
}

func TestClusterRoutesEveryKeyToItsOwner(t *testing.T) {
	systems := startCluster(t, 3)
	ctx := systemtest.Ctx(t)
	const keys = 60
	for i := range keys {
		key := "k" + strconv.Itoa(i)
		from := systems[i%3]
		if err := ccounter.Ref(from, key).Tell(ctx, Add{N: i}); err != nil {
			t.Fatalf("tell %s: %v", key, err)
		}
	}
	served := map[string]int{}
	for i := range keys {
		key := "k" + strconv.Itoa(i)
		// The teller's ask comes after its tell; then an ask from another
		// node, sent after that reply, sees the same activation.
		if _, err := actor.Ask(ctx, ccounter.Ref(systems[i%3], key), Get{}); err != nil {
			t.Fatalf("ask %s: %v", key, err)
		}
		got, err := actor.Ask(ctx, ccounter.Ref(systems[(i+1)%3], key), Get{})
		if err != nil {
			t.Fatalf("ask %s: %v", key, err)
		}
		if got.Count != i {
			t.Fatalf("%s counted %d, want %d", key, got.Count, i)
		}
		if want := system.OwnerOf(systems[0], "ccounter", key); got.Node != want {
			t.Fatalf("%s served by %s, owner is %s", key, got.Node, want)
		}
		served[got.Node]++
	}
	if len(served) != 3 {
		t.Fatalf("keys served by %d nodes, want 3: %v", len(served), served)
	}
	t.Logf("keys per node: %v", served)
}

func TestClusterKeepsOneSendersOrder(t *testing.T) {
	systems := startCluster(t, 2)
	ctx := systemtest.Ctx(t)
	key := remoteKey(t, systems[0], systems[1])
	ref := ccounter.Ref(systems[0], key)
	const n = 5000
	for i := range n {
		if err := ref.Tell(ctx, Add{N: 1}); err != nil {
			t.Fatalf("tell %d: %v", i, err)
		}
	}
	// The ask travels behind the tells on the same key: it sees them all.
	got, err := actor.Ask(ctx, ref, Get{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != n || got.Node != systems[1].Addr() {
		t.Fatalf("got %+v, want %d on %s", got, n, systems[1].Addr())
	}
}

// remoteKey finds a key of ccounter that from places on to.
func remoteKey(t testing.TB, from, to *system.System) string {
	t.Helper()
	return keyPlacedOn(t, from, to, "ccounter", "key-")
}

// keyPlacedOn finds a key of actor type typ, made of prefix and a number,
// that from places on to.
func keyPlacedOn(t testing.TB, from, to *system.System, typ, prefix string) string {
	t.Helper()
	for i := range 10000 {
		key := prefix + strconv.Itoa(i)
		if system.OwnerOf(from, typ, key) == to.Addr() {
			return key
		}
	}
	t.Fatal("no key placed on the target node")
	return ""
}

// benchCluster starts two members for a benchmark.
func benchCluster(b *testing.B) []*system.System {
	return systemtest.StartCluster(b, 2, nil, ccounter)
}

func benchKey(b *testing.B, _, _ string, systems []*system.System) string {
	return remoteKey(b, systems[0], systems[1])
}

func TestClusterAskDeadlineCancelsTheRemoteHandler(t *testing.T) {
	sid := stallID(t)
	systems := startCluster(t, 2)
	key := remoteKey(t, systems[0], systems[1])
	ctx, cancel := context.WithTimeout(systemtest.Ctx(t), 200*time.Millisecond)
	defer cancel()
	_, err := actor.Ask(ctx, ccounter.Ref(systems[0], key), Stall{ID: sid})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	systemtest.Recv(t, stallEnded(sid), "the remote handler's context to end")
}

func TestClusterAskCancelReachesTheOwner(t *testing.T) {
	sid := stallID(t)
	systems := startCluster(t, 2)
	key := remoteKey(t, systems[0], systems[1])
	ctx, cancel := context.WithCancel(systemtest.Ctx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctx, ccounter.Ref(systems[0], key), Stall{ID: sid})
		errc <- err
	}()
	systemtest.Recv(t, stallStarted(sid), "the stall to run on the owner")
	cancel()
	if err := systemtest.Recv(t, errc, "the ask"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", err)
	}
	systemtest.Recv(t, stallEnded(sid), "the remote handler's context to end")
}

func TestClusterRemoteFailureIsActorFailed(t *testing.T) {
	systems := startCluster(t, 2)
	key := remoteKey(t, systems[0], systems[1])
	_, err := actor.Ask(systemtest.Ctx(t), ccounter.Ref(systems[0], key), Fail{})
	if !errors.Is(err, actor.ErrActorFailed) {
		t.Fatalf("err = %v, want ErrActorFailed", err)
	}
	var fe *actor.FailedError
	if !errors.As(err, &fe) || fe.Actor != "ccounter/"+key {
		t.Fatalf("err = %#v, want a FailedError naming ccounter/%s", err, key)
	}
}

func TestClusterAskCycleFailsInsteadOfDeadlocking(t *testing.T) {
	systems := startCluster(t, 2)
	a := remoteKey(t, systems[0], systems[0])
	b := remoteKey(t, systems[0], systems[1])
	// a asks b, b asks a: a waits on b, so a cycle.
	_, err := actor.Ask(systemtest.Ctx(t), ccounter.Ref(systems[0], a), Relay{To: []string{b, a}})
	if !errors.Is(err, actor.ErrAskCycle) {
		t.Fatalf("err = %v, want ErrAskCycle", err)
	}
	// A chain without a cycle passes.
	got, err := actor.Ask(systemtest.Ctx(t), ccounter.Ref(systems[0], a), Relay{To: []string{b, "elsewhere"}})
	if err != nil || got != "end" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestClusterUnknownTypeIsUnknownActor(t *testing.T) {
	other := actor.Define("hosted-nowhere", func(*actor.Context[int, CMsg], CMsg) error { return nil }).WithMessages(Add{})
	systems := startCluster(t, 2)
	err := other.Ref(systems[0], "x").Tell(systemtest.Ctx(t), Add{})
	if !errors.Is(err, actor.ErrUnknownActor) {
		t.Fatalf("err = %v, want ErrUnknownActor", err)
	}
}

func TestClusterAskToADeadOwnerFailsFastThenTheKeyMoves(t *testing.T) {
	sid := stallID(t)
	var victim systemtest.Net
	systems := startClusterCrashable(t, 3, 2, &victim)
	key := remoteKey(t, systems[0], systems[2])
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := actor.Ask(systemtest.Ctx(t), ccounter.Ref(systems[0], key), Stall{ID: sid})
		errc <- err
	}()
	systemtest.Recv(t, stallStarted(sid), "the stall to run on the owner")
	systemtest.Crash(systems[2], &victim)
	err := systemtest.Recv(t, errc, "the ask to fail")
	if !errors.Is(err, actor.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	t.Logf("pending ask failed %v after the owner's crash began", time.Since(start))
	systemtest.WaitUntil(t, "the key to be served again", func() bool {
		got, err := actor.Ask(systemtest.Ctx(t), ccounter.Ref(systems[0], key), Get{})
		return err == nil && got.Node != systems[2].Addr()
	})
}

func TestClusterStartRefusesInterfaceMessagesWithoutRegistry(t *testing.T) {
	bare := actor.Define("bare", func(*actor.Context[int, CMsg], CMsg) error { return nil })
	cc := cluster.FastConfig("127.0.0.1:0")
	_, err := system.Start(systemtest.Ctx(t), system.Config{Actors: []actor.Definition{bare}, Cluster: &cc})
	if !errors.Is(err, actor.ErrInvalidDefinition) {
		t.Fatalf("err = %v, want ErrInvalidDefinition", err)
	}
	if _, err := system.New(system.Config{Cluster: &cc}); !errors.Is(err, system.ErrInvalidConfig) {
		t.Fatalf("New with a cluster: err = %v, want ErrInvalidConfig", err)
	}
}

// The pinned test actor reports where it runs.
type PMsg interface{ pmsg() }

type Where struct {
	actor.Reply[PMsg, string]
}

func (Where) pmsg() {}

var pinnedAgent = actor.Define("agent", func(c *actor.Context[string, PMsg], m PMsg) error {
	return actor.Respond(c, m.(Where), c.State())
}, actor.Pinned()).WithMessages(Where{}).WithInit(func(key string) string { return key })

func TestClusterPinnedRefsReachTheirMember(t *testing.T) {
	var victim systemtest.Net
	systems := startClusterCrashable(t, 3, 2, &victim, pinnedAgent)
	ctx := systemtest.Ctx(t)
	for _, target := range systems {
		for _, from := range systems {
			ref := pinnedAgent.RefAt(from, target.Addr(), "agent")
			got, err := actor.Ask(ctx, ref, Where{})
			if err != nil {
				t.Fatalf("ask the agent on %s from %s: %v", target.Addr(), from.Addr(), err)
			}
			// The state starts as the key, which names the member; the
			// agent answers only where it lives, so served there.
			if want := target.Addr() + "/agent"; got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
	}
	// Each member served its own agent and nobody else's.
	for _, s := range systems {
		if n := s.Stats().Active; n != 1 {
			t.Fatalf("%s has %d activations, want its own agent only", s.Addr(), n)
		}
	}
	// A member that is down makes its pinned refs unavailable.
	down := systems[2]
	addr := down.Addr()
	systemtest.Crash(down, &victim)
	systemtest.WaitUntil(t, "the member to be seen down", func() bool {
		_, err := actor.Ask(ctx, pinnedAgent.RefAt(systems[0], addr, "agent"), Where{})
		return errors.Is(err, actor.ErrUnavailable)
	})
	if _, err := actor.Ask(ctx, pinnedAgent.Ref(systems[0], "no-member-in-key"), Where{}); !errors.Is(err, actor.ErrInvalidRef) {
		t.Fatalf("a pinned key without a member: err = %v, want ErrInvalidRef", err)
	}
}

func TestClusterKeysMoveToAJoiningMember(t *testing.T) {
	events := []*systemtest.Events{systemtest.NewEvents(systemtest.Limit), systemtest.NewEvents(systemtest.Limit), systemtest.NewEvents(systemtest.Limit)}
	systems := systemtest.StartCluster(t, 2, func(i int, cfg *system.Config) { cfg.Observer = events[i].Observe }, ccounter)
	ctx := systemtest.Ctx(t)
	const keys = 60
	for i := range keys {
		if err := ccounter.Ref(systems[0], "m"+strconv.Itoa(i)).Tell(ctx, Add{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range keys { // all handled
		if _, err := actor.Ask(ctx, ccounter.Ref(systems[0], "m"+strconv.Itoa(i)), Get{}); err != nil {
			t.Fatal(err)
		}
	}
	third := systemtest.Join(t, []string{systems[0].Addr()}, func(cfg *system.Config) { cfg.Observer = events[2].Observe }, ccounter)
	all := append(systems, third)
	systemtest.WaitAlive(t, all, 3)
	recordNodes(all)
	moved := 0
	for i := range keys {
		key := "m" + strconv.Itoa(i)
		owner := system.OwnerOf(third, "ccounter", key)
		if owner != third.Addr() {
			continue
		}
		moved++
		// The old owner ends the activation; the new one starts afresh
		// (no state moves without replication).
		old := 0
		if events[1].Count(systemtest.Is(system.ActivationStarted, key)) > 0 {
			old = 1
		}
		events[old].WaitFor(t, "the old owner to end "+key, func(e system.Event) bool {
			return e.Kind == system.ActivationEnded && e.Actor.Key == key && e.Reason == "moved"
		})
		got, err := actor.Ask(ctx, ccounter.Ref(systems[0], key), Get{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Node != third.Addr() || got.Count != 0 {
			t.Fatalf("%s after the move: %+v, want a fresh count on %s", key, got, third.Addr())
		}
	}
	if moved == 0 {
		t.Fatal("no key moved to the new member")
	}
	t.Logf("%d of %d keys moved to the new member", moved, keys)
}

func TestClusterOrderlyLeaveReportsWhatItAbandoned(t *testing.T) {
	sid := stallID(t)
	systems := startCluster(t, 3)
	leaving := systems[2]
	key := remoteKey(t, systems[0], leaving)
	ctx := systemtest.Ctx(t)
	stallCtx, stop := context.WithCancel(ctx)
	defer stop()
	go actor.Ask(stallCtx, ccounter.Ref(systems[0], key), Stall{ID: sid})
	systemtest.Recv(t, stallStarted(sid), "the stall to run")
	if err := ccounter.Ref(systems[0], key).Tell(ctx, Add{N: 1}); err != nil {
		t.Fatal(err)
	}
	systemtest.WaitUntil(t, "the tell to queue behind it", func() bool { return leaving.Stats().Queued > 0 })
	closeCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := leaving.Close(closeCtx)
	var le *system.LeaveError
	if !errors.As(err, &le) {
		ended := false
		select {
		case <-stallEnded(sid):
			ended = true
		default:
		}
		t.Fatalf("Close: %v, want a LeaveError; stall ended %v, stats %+v; key %s owner seen by 0: %s", err, ended, leaving.Stats(), key, system.OwnerOf(systems[0], "ccounter", key))
	}
	if len(le.Abandoned) != 1 || le.Abandoned[0] != (actor.ID{Type: "ccounter", Key: key}) || le.Queued != 1 {
		t.Fatalf("abandoned %v (%d queued), want ccounter/%s with 1", le.Abandoned, le.Queued, key)
	}
	// The rest of the cluster saw it leave, and serves its keys. (The
	// stalled ask, which the leaver never answered, was sent again to the
	// key's new owner: end it.)
	stop()
	systemtest.WaitAlive(t, systems[:2], 2)
	got, err := actor.Ask(ctx, ccounter.Ref(systems[0], key), Get{})
	if err != nil || got.Node == leaving.Addr() {
		t.Fatalf("after the leave: %+v, %v (owner %s, members %v, leaver %s)", got, err, system.OwnerOf(systems[0], "ccounter", key), systems[0].Members(), leaving.Addr())
	}
	// Seen left soon, not removed after SuspectAfter + DeadAfter +
	// RemoveAfter (7 s with the fast timings): the leave was announced
	// though the drain used up its time. (The bound leaves room for a
	// loaded machine: 2 s was missed under a load average of 10.)
	limit := time.Now().Add(4 * time.Second)
	systemtest.WaitUntil(t, "the leaver to be seen left", func() bool {
		if time.Now().After(limit) {
			t.Fatal("the leaver was not seen left within 4 s of its Close")
		}
		for _, m := range systems[0].Members() {
			if m.ID.Addr == leaving.Addr() && m.Status != cluster.StatusLeft {
				return false
			}
		}
		return true
	})
}

// TestClusterBusyKeyRunsOnItsNewOwnerOnlyAfterTheOldOneDrained keeps keys
// busy on their owners (a stalled handler, an Add queued behind it) while
// a third member joins and takes some of them: the new owner must hold
// their messages until the old owner finished and ended the activation
// (hand-off), so a key never runs in two places.
func TestClusterBusyKeyRunsOnItsNewOwnerOnlyAfterTheOldOneDrained(t *testing.T) {
	var mu sync.Mutex
	var order []string // "<member> started|ended <key>", in emission order
	observe := func(i int) func(system.Event) {
		return func(e system.Event) {
			if e.Actor.Type != "ccounter" || (e.Kind != system.ActivationStarted && e.Kind != system.ActivationEnded) {
				return
			}
			what := "started"
			if e.Kind == system.ActivationEnded {
				what = "ended"
			}
			mu.Lock()
			order = append(order, fmt.Sprintf("%d %s %s", i, what, e.Actor.Key))
			mu.Unlock()
		}
	}
	indexOf := func(s string) int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Index(order, s)
	}
	systems := systemtest.StartCluster(t, 2, func(i int, cfg *system.Config) { cfg.Observer = observe(i) }, ccounter)
	ctx := systemtest.Ctx(t)
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = "busy-" + strconv.Itoa(i)
	}
	// The stalls hold their keys until the test releases them, however
	// long the join takes.
	stallCtx, release := context.WithCancel(ctx)
	var released atomic.Bool
	var stalled sync.WaitGroup
	for _, key := range keys {
		stalled.Go(func() { actor.Ask(stallCtx, ccounter.Ref(systems[0], key), Stall{ID: stallID(t)}) })
	}
	defer stalled.Wait()
	defer release()
	owner := map[string]int{}
	for _, key := range keys {
		o := 0
		if system.OwnerOf(systems[0], "ccounter", key) == systems[1].Addr() {
			o = 1
		}
		owner[key] = o
		systemtest.WaitUntil(t, key+" to run its stall", func() bool { return indexOf(fmt.Sprintf("%d started %s", o, key)) >= 0 })
		if err := ccounter.Ref(systems[0], key).Tell(ctx, Add{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	third := systemtest.Join(t, []string{systems[0].Addr()}, func(cfg *system.Config) { cfg.Observer = observe(2) }, ccounter)
	all := append(systems, third)
	systemtest.WaitAlive(t, all, 3)
	recordNodes(all)
	var moved []string
	for _, key := range keys {
		if system.OwnerOf(third, "ccounter", key) == third.Addr() && system.OwnerOf(systems[0], "ccounter", key) == third.Addr() {
			moved = append(moved, key)
		}
	}
	if len(moved) == 0 {
		t.Fatal("no key moved to the new member")
	}
	type answer struct {
		key string
		got CountReply
		err error
	}
	answers := make(chan answer, len(moved))
	for _, key := range moved {
		if err := ccounter.Ref(systems[0], key).Tell(ctx, Add{N: 10}); err != nil {
			t.Fatal(err)
		}
		go func() {
			got, err := actor.Ask(ctx, ccounter.Ref(systems[0], key), Get{})
			if !released.Load() {
				err = fmt.Errorf("answered by %s while its old owner still ran the stalled handler (%v)", got.Node, err)
			}
			answers <- answer{key, got, err}
		}()
	}
	for _, key := range moved {
		if i := indexOf("2 started " + key); i >= 0 {
			t.Fatalf("%s started on the new member while its old owner still ran the stalled handler", key)
		}
	}
	released.Store(true)
	release()
	for range moved {
		a := systemtest.Recv(t, answers, "the moved keys' answers")
		if a.err != nil {
			t.Fatalf("%s: %v", a.key, a.err)
		}
		if a.got.Node != third.Addr() || a.got.Count != 10 {
			t.Fatalf("%s after the move: %+v, want a fresh count of 10 on %s", a.key, a.got, third.Addr())
		}
		ended, started := indexOf(fmt.Sprintf("%d ended %s", owner[a.key], a.key)), indexOf("2 started "+a.key)
		if ended < 0 || started < ended {
			mu.Lock()
			t.Fatalf("%s: expected the old owner (%d) to end the activation before the new one started it; events: %v", a.key, owner[a.key], order)
		}
	}
	t.Logf("%d of %d busy keys moved to the joining member; each started there after its old activation ended", len(moved), len(keys))
}
