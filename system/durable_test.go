package system_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// Counter messages: the durable actors of these tests.
type CountMsg interface{ countMsg() }

// DAdd adds N to the count and answers the new count.
type DAdd struct {
	actor.Reply[CountMsg, int]
	N int
}

// DGet answers the count.
type DGet struct{ actor.Reply[CountMsg, int] }

// DForget deletes the key for good.
type DForget struct{ actor.Reply[CountMsg, int] }

// DTick adds one, from a timer.
type DTick struct{}

// DRelease releases the activation.
type DRelease struct{}

// DArm sets the timer "t" to tell DTick after D (every D when Repeat).
type DArm struct {
	actor.Reply[CountMsg, int]
	D      time.Duration
	Repeat bool
	// Heard: the timer sends DHeard{N: -1}, which changes no state,
	// instead of DTick.
	Heard bool
}

// DRelay adds N, then tells To that it did, after the change.
type DRelay struct {
	actor.Reply[CountMsg, int]
	N  int
	To actor.Ref[CountMsg]
}

// DHeard is what DRelay tells.
type DHeard struct{ N int }

func (DAdd) countMsg()     {}
func (DGet) countMsg()     {}
func (DForget) countMsg()  {}
func (DTick) countMsg()    {}
func (DRelease) countMsg() {}
func (DArm) countMsg()     {}
func (DRelay) countMsg()   {}
func (DHeard) countMsg()   {}

// counterDef defines a counter under name; ticks, if not nil, hears
// every DTick handled (the count after it) and heard every DHeard.
func counterDef(name string, ticks chan<- int, opts ...actor.Option) *actor.Def[int, CountMsg] {
	return actor.Define(name, func(c *actor.Context[int, CountMsg], m CountMsg) error {
		switch m := m.(type) {
		case DAdd:
			c.Update(func(n int) int { return n + m.N })
			return actor.Respond(c, m, c.State())
		case DGet:
			return actor.Respond(c, m, c.State())
		case DForget:
			c.Delete()
			return actor.Respond(c, m, c.State())
		case DTick:
			c.Update(func(n int) int { return n + 1 })
			if ticks != nil {
				ticks <- c.State()
			}
		case DArm:
			var tick CountMsg = DTick{}
			if m.Heard {
				tick = DHeard{N: -1}
			}
			if m.Repeat {
				c.Every("t", m.D, tick)
			} else {
				c.After("t", m.D, tick)
			}
			return actor.Respond(c, m, c.State())
		case DRelay:
			c.Update(func(n int) int { return n + m.N })
			if err := m.To.Tell(c, DHeard{N: c.State()}); err != nil {
				return err
			}
			return actor.Respond(c, m, c.State())
		case DHeard:
			if ticks != nil {
				ticks <- m.N
			}
		case DRelease:
			c.Release()
		}
		return nil
	}, opts...).WithMessages(DAdd{}, DGet{}, DForget{}, DTick{}, DArm{}, DRelay{}, DHeard{}, DRelease{})
}

func add(t testing.TB, ref actor.Ref[CountMsg], n int) int {
	t.Helper()
	got, err := actor.Ask(systemtest.Ctx(t), ref, DAdd{N: n})
	if err != nil {
		t.Fatalf("add %d to %v: %v", n, ref, err)
	}
	return got
}

func get(t testing.TB, ref actor.Ref[CountMsg]) int {
	t.Helper()
	got, err := actor.Ask(systemtest.Ctx(t), ref, DGet{})
	if err != nil {
		t.Fatalf("get %v: %v", ref, err)
	}
	return got
}

// closeNow closes sys and fails the test if Close does.
func closeNow(t testing.TB, sys *system.System) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), systemtest.Limit)
	defer cancel()
	if err := sys.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func newStandalone(t testing.TB, cfg system.Config, defs ...actor.Definition) *system.System {
	t.Helper()
	cfg.Actors = defs
	sys, err := system.New(cfg)
	if err != nil {
		t.Fatalf("system.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), systemtest.Limit)
		defer cancel()
		sys.Close(ctx)
	})
	return sys
}

func TestSyncWithoutDataDirIsRefused(t *testing.T) {
	_, err := system.New(system.Config{Sync: true})
	if !errors.Is(err, system.ErrInvalidConfig) {
		t.Fatalf("Sync without DataDir: %v, want ErrInvalidConfig", err)
	}
}

func TestADurableCounterSurvivesARestartOnTheSameDataDir(t *testing.T) {
	dir := t.TempDir()
	def := counterDef("counter", nil, actor.Durable())
	sys := newStandalone(t, system.Config{DataDir: dir}, def)
	for i := 1; i <= 5; i++ {
		add(t, def.Ref(sys, "a"), i)
	}
	closeNow(t, sys)

	sys = newStandalone(t, system.Config{DataDir: dir, Sync: true}, def)
	if got := get(t, def.Ref(sys, "a")); got != 15 {
		t.Fatalf("after a restart the count is %d, want 15", got)
	}
	if got := get(t, def.Ref(sys, "b")); got != 0 {
		t.Fatalf("a key never written starts at %d, want 0", got)
	}
}

// A standalone system whose store stopped uncleanly without Sync (its
// directory copied while it ran, as a crash leaves it) has no other
// replica to catch up from: it serves at once from what the store holds.
func TestAStandaloneStoreThatStoppedUncleanlyServesAtOnce(t *testing.T) {
	dir := t.TempDir()
	def := counterDef("counter", nil, actor.Durable())
	sys := newStandalone(t, system.Config{DataDir: dir}, def)
	for i := 1; i <= 5; i++ {
		add(t, def.Ref(sys, "a"), i)
	}
	crashed := copyDir(t, dir)
	closeNow(t, sys)

	sys = newStandalone(t, system.Config{DataDir: crashed}, def)
	if got := add(t, def.Ref(sys, "a"), 1); got != 16 {
		t.Fatalf("after an unclean stop the count is %d, want 16", got)
	}
}

func TestADurableKeyKeepsItsStateAcrossPassivation(t *testing.T) {
	events := systemtest.NewEvents(systemtest.Limit)
	def := counterDef("counter", nil, actor.Durable(), actor.WithIdleTimeout(20*time.Millisecond))
	sys := newStandalone(t, system.Config{Observer: events.Observe}, def)
	add(t, def.Ref(sys, "a"), 7)
	events.WaitFor(t, "the key passivates", func(e system.Event) bool {
		return e.Kind == system.ActivationEnded && e.Actor.Key == "a" && e.Reason == "idle"
	})
	if got := add(t, def.Ref(sys, "a"), 1); got != 8 {
		t.Fatalf("after passivation the count is %d, want 8", got)
	}
}

func TestAKeyThatIsNeitherDurableNorReplicatedStartsOverAfterPassivation(t *testing.T) {
	events := systemtest.NewEvents(systemtest.Limit)
	def := counterDef("counter", nil, actor.WithIdleTimeout(20*time.Millisecond))
	sys := newStandalone(t, system.Config{Observer: events.Observe}, def)
	add(t, def.Ref(sys, "a"), 7)
	events.WaitFor(t, "the key passivates", systemtest.Is(system.ActivationEnded, "a"))
	if got := get(t, def.Ref(sys, "a")); got != 0 {
		t.Fatalf("a plain key's count after passivation is %d, want 0", got)
	}
}

func TestARestartAfterAFailureKeepsTheDurableState(t *testing.T) {
	def := actor.Define("flaky", func(c *actor.Context[int, CountMsg], m CountMsg) error {
		switch m := m.(type) {
		case DAdd:
			c.Update(func(n int) int { return n + m.N })
			if m.N < 0 {
				panic("negative")
			}
			return actor.Respond(c, m, c.State())
		case DGet:
			return actor.Respond(c, m, c.State())
		}
		return nil
	}, actor.Durable(), actor.WithBackoff(time.Millisecond, time.Millisecond)).WithMessages(DAdd{}, DGet{})
	sys := newStandalone(t, system.Config{}, def)
	add(t, def.Ref(sys, "a"), 5)
	if _, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "a"), DAdd{N: -1}); !errors.Is(err, actor.ErrActorFailed) {
		t.Fatalf("a panicking handler: %v, want ErrActorFailed", err)
	}
	if got := get(t, def.Ref(sys, "a")); got != 4 {
		t.Fatalf("after the restart the count is %d, want 4 (the last SetState, stored)", got)
	}
}

func TestDeleteStartsTheKeyOverFromInit(t *testing.T) {
	dir := t.TempDir()
	def := counterDef("counter", nil, actor.Durable())
	def.WithInit(func(string) int { return 100 })
	sys := newStandalone(t, system.Config{DataDir: dir}, def)
	add(t, def.Ref(sys, "a"), 5)
	if _, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "a"), DForget{}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, def.Ref(sys, "a")); got != 100 {
		t.Fatalf("after Delete the count is %d, want WithInit's 100", got)
	}
	closeNow(t, sys)
	sys = newStandalone(t, system.Config{DataDir: dir}, def)
	if got := get(t, def.Ref(sys, "a")); got != 100 {
		t.Fatalf("after Delete and a restart the count is %d, want WithInit's 100", got)
	}
}

func TestAStateWhoseTypeChangedFailsWithStateErrorAndStaysStored(t *testing.T) {
	dir := t.TempDir()
	def := counterDef("counter", nil, actor.Durable())
	sys := newStandalone(t, system.Config{DataDir: dir}, def)
	add(t, def.Ref(sys, "a"), 42)
	closeNow(t, sys)

	type account struct{ Owner string }
	changed := actor.Define("counter", func(c *actor.Context[account, CountMsg], m CountMsg) error {
		if g, ok := m.(DGet); ok {
			return actor.Respond(c, g, len(c.State().Owner))
		}
		return nil
	}, actor.Durable(), actor.WithBackoff(time.Millisecond, time.Millisecond)).WithMessages(DAdd{}, DGet{})
	sys = newStandalone(t, system.Config{DataDir: dir}, changed)
	_, err := actor.Ask(systemtest.Ctx(t), changed.Ref(sys, "a"), DGet{})
	var se *actor.StateError
	if !errors.As(err, &se) || se.Definition != "counter" || se.Key != "a" {
		t.Fatalf("a state whose type changed: %v, want a *StateError naming counter/a", err)
	}
	closeNow(t, sys)

	sys = newStandalone(t, system.Config{DataDir: dir}, def)
	if got := get(t, def.Ref(sys, "a")); got != 42 {
		t.Fatalf("the stored state after the failed decode is %d, want 42 (untouched)", got)
	}
}

func TestAStateOverTheStoreLimitIsRefusedAndNotWritten(t *testing.T) {
	big := actor.Define("big", func(c *actor.Context[[]byte, CountMsg], m CountMsg) error {
		switch m := m.(type) {
		case DAdd:
			c.SetState(make([]byte, m.N))
			return actor.Respond(c, m, len(c.State()))
		case DGet:
			return actor.Respond(c, m, len(c.State()))
		}
		return nil
	}, actor.Durable()).WithMessages(DAdd{}, DGet{})
	sys := newStandalone(t, system.Config{}, big)
	ref := big.Ref(sys, "a")
	if _, err := actor.Ask(systemtest.Ctx(t), ref, DAdd{N: 10}); err != nil {
		t.Fatal(err)
	}
	_, err := actor.Ask(systemtest.Ctx(t), ref, DAdd{N: 8 << 20})
	if !errors.Is(err, actor.ErrMessageTooLarge) {
		t.Fatalf("a state over the limit: %v, want ErrMessageTooLarge", err)
	}
	if got, err := actor.Ask(systemtest.Ctx(t), ref, DGet{}); err != nil || got != 10 {
		t.Fatalf("after the refused write the state holds %d bytes (%v), want the stored 10", got, err)
	}
}

func TestATimerOfADurableKeyFiresAfterARestart(t *testing.T) {
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
	if got := get(t, def.Ref(sys, "a")); got != 10 { // activates the key: its timer is set again
		t.Fatalf("count %d, want 10", got)
	}
	if got := systemtest.Recv(t, ticks, "the stored timer"); got != 11 {
		t.Fatalf("the timer's DTick made the count %d, want 11", got)
	}
	select {
	case n := <-ticks:
		t.Fatalf("the one-shot timer fired again (count %d)", n)
	case <-time.After(400 * time.Millisecond):
	}
	closeNow(t, sys)
	// Fired once, it left the record: a new activation does not fire it.
	sys = newStandalone(t, system.Config{DataDir: dir}, def)
	if got := get(t, def.Ref(sys, "a")); got != 11 {
		t.Fatalf("count %d, want 11", got)
	}
	select {
	case n := <-ticks:
		t.Fatalf("a timer that fired came back (count %d)", n)
	case <-time.After(400 * time.Millisecond):
	}
}

func TestAPinnedDurableActorRestartsFromItsStoredState(t *testing.T) {
	dir := t.TempDir()
	def := counterDef("pinned", nil, actor.Pinned(), actor.Durable())
	start := func(addr string) *system.System {
		return systemtest.Join(t, nil, func(cfg *system.Config) {
			cfg.DataDir = dir
			if addr != "" {
				cfg.Cluster.Bind, cfg.Cluster.Advertise = addr, addr
			}
		}, def)
	}
	sys := start("")
	addr := sys.Addr()
	add(t, def.RefAt(sys, addr, "a"), 9)
	closeNow(t, sys)

	sys = start(addr)
	if got := get(t, def.RefAt(sys, addr, "a")); got != 9 {
		t.Fatalf("the pinned actor restarted with %d, want its stored 9", got)
	}
}
