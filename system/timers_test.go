package system_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// The timers of a durable key fire on its owner with no message to the
// key: after a restart on the DataDir, after its owner died, and after a
// join changed its replica set (which ends its activation).

func TestAStoredTimerFiresAfterARestartWithNoMessageToItsKey(t *testing.T) {
	dir := t.TempDir()
	ticks := make(chan int, 16)
	def := counterDef("counter", ticks, actor.Durable())
	sys := newStandalone(t, system.Config{DataDir: dir}, def)
	add(t, def.Ref(sys, "a"), 10)
	if _, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "a"), DArm{D: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	closeNow(t, sys) // before the timer fires

	sys = newStandalone(t, system.Config{DataDir: dir}, def)
	if got := systemtest.Recv(t, ticks, "the stored timer, the key not asked"); got != 11 {
		t.Fatalf("the timer's DTick made the count %d, want 11", got)
	}
	if got := get(t, def.Ref(sys, "a")); got != 11 {
		t.Fatalf("count %d, want 11", got)
	}
}

func TestAStoredTimerFiresOnTheNewOwnerWithNoMessageToItsKey(t *testing.T) {
	ticks := make(chan int, 16)
	def := counterDef("counter", ticks, actor.WithReplicas(3, actor.WriteMajority))
	systems, _ := replicatedCluster(t, 3, def)
	ref := def.Ref(systems[0], "k")
	add(t, ref, 5)
	if _, err := actor.Ask(systemtest.Ctx(t), ref, DArm{D: time.Second}); err != nil {
		t.Fatal(err)
	}
	owner, _ := byAddr(t, systems, system.OwnerOf(systems[0], "counter", "k"))
	closeNow(t, owner) // before the timer fires: its timers stop with it
	if got := systemtest.Recv(t, ticks, "the timer on the new owner, the key not asked"); got != 6 {
		t.Fatalf("the timer's tick made the count %d, want 6", got)
	}
	select {
	case n := <-ticks:
		t.Fatalf("the one-shot timer fired twice (count %d)", n)
	case <-time.After(500 * time.Millisecond):
	}
}

// beat is what a metronome hears from its Every timer.
type beat struct{ key, member string }

// BeatMsg is the metronome's message type.
type BeatMsg interface{ beatMsg() }

// Start arms a metronome's timer.
type Start struct {
	actor.Reply[BeatMsg, bool]
	D time.Duration
}

// Beat is the metronome's timer message.
type Beat struct{}

func (Start) beatMsg() {}
func (Beat) beatMsg()  {}

// metronome counts its timer's beats in its state and reports each one
// (key and member) to beats.
func metronome(beats chan<- beat) *actor.Def[int, BeatMsg] {
	return actor.Define("metronome", func(c *actor.Context[int, BeatMsg], m BeatMsg) error {
		switch m := m.(type) {
		case Start:
			c.Every("beat", m.D, Beat{})
			return actor.Respond(c, m, true)
		case Beat:
			c.Update(func(n int) int { return n + 1 })
			select {
			case beats <- beat{key: c.Key(), member: c.Member()}:
			default:
			}
		}
		return nil
	}, actor.WithReplicas(3, actor.WriteMajority)).WithMessages(Start{}, Beat{})
}

func TestEveryTimerKeepsBeatingOnItsOwnerThroughAJoin(t *testing.T) {
	beats := make(chan beat, 4096)
	def := metronome(beats)
	systems, _ := replicatedCluster(t, 3, def)
	const keys = 24
	for i := range keys {
		if _, err := actor.Ask(systemtest.Ctx(t), def.Ref(systems[0], fmt.Sprint("m", i)), Start{D: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	last := map[string]beat{} // each key's last beat
	since := map[string]int{} // its beats since the count was reset
	strays := 0               // beats, once counted, from a member not the owner
	owners := map[string]string{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case b := <-beats:
				mu.Lock()
				last[b.key] = b
				since[b.key]++
				if o, ok := owners[b.key]; ok && b.member != o {
					strays++
				}
				mu.Unlock()
			case <-done:
				return
			}
		}
	})
	defer func() { close(done); wg.Wait() }()

	joined := systemtest.Join(t, []string{systems[0].Addr()}, nil, def)
	all := append(systems, joined)
	systemtest.WaitAlive(t, all, len(all))
	// Each key beats on the member that owns it once the members agree;
	// then, counted afresh, it keeps beating there and nowhere else: keys
	// whose replica set changed ended their activations at the change,
	// and nothing asks them.
	beating := func(counting bool) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for i := range keys {
				k := fmt.Sprint("m", i)
				o := system.OwnerOf(joined, "metronome", k)
				for _, s := range all {
					if system.OwnerOf(s, "metronome", k) != o {
						return false // the members do not agree yet
					}
				}
				if !counting && last[k].member != o {
					since[k] = 0
				}
				if since[k] < 3 || last[k].member != o {
					return false
				}
			}
			return true
		}
	}
	systemtest.WaitUntil(t, "every key beating on its owner after the join", beating(false))
	mu.Lock()
	for i := range keys {
		k := fmt.Sprint("m", i)
		owners[k], since[k] = last[k].member, 0
	}
	mu.Unlock()
	systemtest.WaitUntil(t, "every key beating on, on the same owner", beating(true))
	mu.Lock()
	defer mu.Unlock()
	if strays > 0 {
		t.Errorf("%d beats came from a member that does not own the key", strays)
	}
	moved := 0
	for _, o := range owners {
		if o == joined.Addr() {
			moved++
		}
	}
	t.Logf("%d of %d keys beat on the member that joined", moved, keys)
}

// SlowMsg is the message type of a key whose handlers wait to be let go.
type SlowMsg interface{ slowMsg() }

// SBlock arms a one-shot timer (STick after 1 ms), adds 1, then waits.
type SBlock struct{}

// STick adds 100 to the state, then waits.
type STick struct{}

// SGet answers the state.
type SGet struct{ actor.Reply[SlowMsg, int] }

func (SBlock) slowMsg() {}
func (STick) slowMsg()  {}
func (SGet) slowMsg()   {}

// SRelease arms a one-shot timer (STick after 1 ms), adds 1, waits, then
// releases the activation.
type SRelease struct{}

func (SRelease) slowMsg() {}

// slowDef defines a durable key whose SBlock, SRelease and STick report
// their start to entered, then wait for release.
func slowDef(name string) (def *actor.Def[int, SlowMsg], entered chan string, release chan struct{}) {
	entered, release = make(chan string, 4), make(chan struct{})
	def = actor.Define(name, func(c *actor.Context[int, SlowMsg], m SlowMsg) error {
		switch m := m.(type) {
		case SBlock, SRelease:
			c.After("t", time.Millisecond, STick{})
			c.Update(func(n int) int { return n + 1 })
			if _, ok := m.(SRelease); ok {
				entered <- "release"
				c.Release()
			} else {
				entered <- "block"
			}
		case STick:
			c.Update(func(n int) int { return n + 100 })
			entered <- "tick"
		case SGet:
			return actor.Respond(c, m, c.State())
		}
		<-release
		return nil
	}, actor.Durable()).WithMessages(SBlock{}, SRelease{}, STick{}, SGet{})
	return def, entered, release
}

func TestAOneShotTimerFiresAgainAfterACrashBeforeItsMessageWasCommitted(t *testing.T) {
	def, entered, release := slowDef("slow")
	dir := t.TempDir()
	sys := newStandalone(t, system.Config{DataDir: dir, Sync: true}, def)
	if err := def.Ref(sys, "k").Tell(systemtest.Ctx(t), SBlock{}); err != nil {
		t.Fatal(err)
	}
	if got := systemtest.Recv(t, entered, "SBlock's handler"); got != "block" {
		t.Fatalf("entered %q, want block", got)
	}
	// The timer fired while SBlock's handler ran: its STick waits behind.
	systemtest.WaitUntil(t, "the timer's STick to queue", func() bool { return sys.Stats().Queued == 1 })
	release <- struct{}{} // SBlock commits, the timer still in the record
	if got := systemtest.Recv(t, entered, "STick's handler"); got != "tick" {
		t.Fatalf("entered %q, want tick", got)
	}
	crashed := copyDir(t, dir) // a crash before STick's commit: Sync made SBlock's durable
	release <- struct{}{}
	closeNow(t, sys)

	sys = newStandalone(t, system.Config{DataDir: crashed}, def)
	if got := systemtest.Recv(t, entered, "the timer again on the restarted system, the key not asked"); got != "tick" {
		t.Fatalf("entered %q, want tick", got)
	}
	release <- struct{}{}
	if got, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "k"), SGet{}); err != nil || got != 101 {
		t.Fatalf("after the restart: %d, %v; want 101 (SBlock's 1 and the timer's 100, once)", got, err)
	}
	select {
	case e := <-entered:
		t.Fatalf("%s ran again", e)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestAOneShotTimerThatFiredBeforeARelease(t *testing.T) {
	def, entered, release := slowDef("releasing")
	sys := newStandalone(t, system.Config{DataDir: t.TempDir()}, def)
	if err := def.Ref(sys, "k").Tell(systemtest.Ctx(t), SRelease{}); err != nil {
		t.Fatal(err)
	}
	if got := systemtest.Recv(t, entered, "SRelease's handler"); got != "release" {
		t.Fatalf("entered %q, want release", got)
	}
	// The timer fires while the activation still runs; it ends once
	// SRelease is handled, the record holding the fired timer, and STick
	// activates the key again.
	systemtest.WaitUntil(t, "the timer's STick to queue", func() bool { return sys.Stats().Queued == 1 })
	release <- struct{}{}
	if got := systemtest.Recv(t, entered, "the timer's STick"); got != "tick" {
		t.Fatalf("entered %q, want tick", got)
	}
	release <- struct{}{}
	if got, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "k"), SGet{}); err != nil || got != 101 {
		t.Fatalf("after the timer: %d, %v; want 101", got, err)
	}
	select {
	case e := <-entered:
		t.Fatalf("%s ran again: the fired timer came back with the new activation", e)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestAStoredTimerFiresOnTheNewOwnerAfterItsOwnerCrashed(t *testing.T) {
	ticks := make(chan int, 16)
	def := counterDef("counter", ticks, actor.WithReplicas(3, actor.WriteMajority))
	systems, nets := replicatedCluster(t, 3, def)
	ref := def.Ref(systems[0], "k")
	add(t, ref, 5)
	if _, err := actor.Ask(systemtest.Ctx(t), ref, DArm{D: time.Second}); err != nil {
		t.Fatal(err)
	}
	owner, i := byAddr(t, systems, system.OwnerOf(systems[0], "counter", "k"))
	systemtest.Crash(owner, nets[i]) // no leave, no hand-off: found dead by silence
	if got := systemtest.Recv(t, ticks, "the timer on the new owner, the key not asked"); got != 6 {
		t.Fatalf("the timer's tick made the count %d, want 6", got)
	}
	select {
	case n := <-ticks:
		t.Fatalf("the one-shot timer fired twice (count %d)", n)
	case <-time.After(500 * time.Millisecond):
	}
}

// A durable key whose timers are all stored passivates when idle, like
// any other, and its owner wakes it when the first is due.

func TestAnIdleKeyWithAStoredTimerPassivatesAndIsWokenWhenItIsDue(t *testing.T) {
	evs := systemtest.NewEvents(systemtest.Limit)
	ticks := make(chan int, 16)
	def := counterDef("counter", ticks, actor.Durable(), actor.WithIdleTimeout(50*time.Millisecond))
	sys := newStandalone(t, system.Config{Observer: evs.Observe}, def)
	ref := def.Ref(sys, "a")
	add(t, ref, 5)
	const d = 2 * time.Second // well after the key idles out
	armed := time.Now()
	if _, err := actor.Ask(systemtest.Ctx(t), ref, DArm{D: d}); err != nil {
		t.Fatal(err)
	}
	evs.WaitFor(t, "the key with a stored timer to idle out", endedFor("a", "idle"))
	noTickYet(t, ticks)
	if got := systemtest.Recv(t, ticks, "the timer, its key woken by the store"); got != 6 {
		t.Fatalf("the timer's tick made the count %d, want 6", got)
	}
	if early := d - time.Since(armed); early > 0 {
		t.Fatalf("the timer fired %v early", early)
	}
	if n := evs.Count(systemtest.Is(system.ActivationStarted, "a")); n != 2 {
		t.Fatalf("%d activations of the key, want 2 (the asks', then the wake's)", n)
	}
	if got := get(t, ref); got != 6 {
		t.Fatalf("count %d after the tick, want 6", got)
	}
}

func TestAKeyWithALongEveryTimerSleepsBetweenItsBeats(t *testing.T) {
	for _, c := range []struct {
		name  string
		heard bool
	}{{"beats that change the state", false}, {"beats that change nothing", true}} {
		t.Run(c.name, func(t *testing.T) {
			evs := systemtest.NewEvents(systemtest.Limit)
			ticks := make(chan int, 16)
			def := counterDef("counter", ticks, actor.Durable(), actor.WithIdleTimeout(50*time.Millisecond))
			sys := newStandalone(t, system.Config{Observer: evs.Observe}, def)
			ref := def.Ref(sys, "a")
			const period = 800 * time.Millisecond
			if _, err := actor.Ask(systemtest.Ctx(t), ref, DArm{D: period, Repeat: true, Heard: c.heard}); err != nil {
				t.Fatal(err)
			}
			var at []time.Time
			for range 4 {
				systemtest.Recv(t, ticks, "a beat")
				at = append(at, time.Now())
			}
			for i := 1; i < len(at); i++ {
				// Each beat stores when the next is due; a key woken on
				// a due time its record no longer held would beat as
				// soon as it was woken.
				if gap := at[i].Sub(at[i-1]); gap < period/2 {
					t.Fatalf("beats %d and %d came %v apart, every %v wanted", i-1, i, gap, period)
				}
			}
			if n := evs.Count(endedFor("a", "idle")); n < 3 {
				t.Fatalf("the key idled out %d times in 4 beats every %v with a 50ms idle timeout; want it asleep between each", n, period)
			}
		})
	}
}

func TestAReplicatedKeyAsleepWithAStoredTimerIsWokenByItsOwner(t *testing.T) {
	const n = 3
	evs := make([]*systemtest.Events, n)
	nets := make([]*systemtest.Net, n)
	for i := range n {
		evs[i], nets[i] = systemtest.NewEvents(systemtest.Limit), &systemtest.Net{}
	}
	ticks := make(chan int, 16)
	def := counterDef("counter", ticks, actor.WithReplicas(3, actor.WriteMajority), actor.WithIdleTimeout(50*time.Millisecond))
	systems := systemtest.StartCluster(t, n, func(i int, cfg *system.Config) {
		nets[i].Attach(t, cfg)
		cfg.Observer = evs[i].Observe
	}, def)
	ref := def.Ref(systems[0], "k")
	add(t, ref, 5)
	if _, err := actor.Ask(systemtest.Ctx(t), ref, DArm{D: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	_, o := byAddr(t, systems, system.OwnerOf(systems[0], "counter", "k"))
	evs[o].WaitFor(t, "the key to idle out on its owner", endedFor("k", "idle"))
	noTickYet(t, ticks)
	if got := systemtest.Recv(t, ticks, "the timer, its key woken by its owner"); got != 6 {
		t.Fatalf("the timer's tick made the count %d, want 6", got)
	}
	for i := range n {
		want := 0
		if i == o {
			want = 2 // the asks', then the wake's
		}
		if got := evs[i].Count(systemtest.Is(system.ActivationStarted, "k")); got != want {
			t.Errorf("member %d (owner %d) activated the key %d times, want %d", i, o, got, want)
		}
	}
}

func TestAReleasedKeyWhoseTimerWasDueWhileItRanIsWokenAgain(t *testing.T) {
	ticks := make(chan int, 64)
	// Beats shorter than the idle timeout that change nothing: the
	// record keeps the first due time, which passes while the key runs
	// (the waker finds the key active then, and leaves it).
	evs := systemtest.NewEvents(systemtest.Limit)
	def := counterDef("counter", ticks, actor.Durable())
	sys := newStandalone(t, system.Config{Observer: evs.Observe}, def)
	ref := def.Ref(sys, "a")
	if _, err := actor.Ask(systemtest.Ctx(t), ref, DArm{D: 100 * time.Millisecond, Repeat: true, Heard: true}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		systemtest.Recv(t, ticks, "a beat")
	}
	if err := ref.Tell(systemtest.Ctx(t), DRelease{}); err != nil {
		t.Fatal(err)
	}
	// Its stored timer is overdue once the activation ends: the key is
	// woken again and beats on, with no message to it.
	evs.WaitFor(t, "the release", endedFor("a", "released"))
	for len(ticks) > 0 {
		<-ticks
	}
	for range 3 {
		systemtest.Recv(t, ticks, "a beat after the release")
	}
}

// endedFor matches the end of key's activation for reason.
func endedFor(key, reason string) func(system.Event) bool {
	return func(e system.Event) bool { return systemtest.Is(system.ActivationEnded, key)(e) && e.Reason == reason }
}

// noTickYet fails the test if the timer already reported a tick.
func noTickYet(t *testing.T, ticks <-chan int) {
	t.Helper()
	select {
	case n := <-ticks:
		t.Fatalf("the timer fired (count %d) before the key idled out", n)
	default:
	}
}
