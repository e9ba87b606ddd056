package system_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

func TestKeysActivateLazilyOnTheFirstMessage(t *testing.T) {
	evs := systemtest.NewEvents(systemtest.Limit)
	def := probe("lazy", nil, nil)
	sys := systemtest.NewSystem(t, system.Config{Observer: evs.Observe}, def)
	refs := []actor.Ref[Msg]{def.Ref(sys, "a"), def.Ref(sys, "b")}
	if st := sys.Stats(); st.Active != 0 || len(evs.Snapshot()) != 0 {
		t.Fatalf("taking refs activated something: %+v, events %v", st, evs.Snapshot())
	}
	if got, err := actor.Ask(systemtest.Ctx(t), refs[0], Do{Op: "hi"}); err != nil || got != "hi 1" {
		t.Fatalf("Ask = %q, %v", got, err)
	}
	ev := evs.WaitFor(t, "ActivationStarted", systemtest.Is(system.ActivationStarted, "a"))
	if ev.Actor != (actor.ID{Type: "lazy", Key: "a"}) {
		t.Errorf("event actor = %v, want lazy/a", ev.Actor)
	}
	if st := sys.Stats(); st.Active != 1 {
		t.Errorf("Stats.Active = %d after one key got a message, want 1", st.Active)
	}
	if n := evs.Count(systemtest.Is(system.ActivationStarted, "b")); n != 0 {
		t.Errorf("b activated without a message")
	}
}

func TestAHandlerNeverRunsConcurrentlyWithItself(t *testing.T) {
	const keys, senders, perSender = 3, 8, 150
	var inside [keys]atomic.Int32
	var overlaps, handled atomic.Int64
	def := actor.Define("serial", func(c *actor.Context[int, Msg], m Msg) error {
		i := int(c.Key()[0] - 'a')
		if inside[i].Add(1) != 1 {
			overlaps.Add(1)
		}
		runtime.Gosched()
		c.Update(func(n int) int { return n + 1 })
		inside[i].Add(-1)
		handled.Add(1)
		if d, ok := m.(Do); ok {
			return actor.Respond(c, d, "")
		}
		return nil
	}, actor.WithMailbox(senders*perSender, actor.Refuse))
	sys := systemtest.NewSystem(t, system.Config{}, def)
	ctx := systemtest.Ctx(t)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				ref := def.Ref(sys, string(rune('a'+(s+i)%keys)))
				var err error
				if i%10 == 0 {
					_, err = actor.Ask(ctx, ref, Do{})
				} else {
					err = ref.Tell(ctx, Note{})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	systemtest.WaitUntil(t, "every message is handled", func() bool { return handled.Load() == senders*perSender })
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("a handler ran concurrently with itself %d times", n)
	}
}

func TestKeysRunIndependently(t *testing.T) {
	g := newGate()
	def := probe("independent", g, nil)
	sys := systemtest.NewSystem(t, system.Config{}, def)
	defer close(g.open)
	ctx := systemtest.Ctx(t)
	if err := def.Ref(sys, "stuck").Tell(ctx, Note{Op: "block"}); err != nil {
		t.Fatal(err)
	}
	systemtest.Recv(t, g.entered, "stuck to block")
	if got, err := actor.Ask(ctx, def.Ref(sys, "free"), Do{Op: "hi"}); err != nil || got != "hi 1" {
		t.Fatalf("a key blocked another: Ask = %q, %v", got, err)
	}
}

func TestMessagesFromOneSenderAreHandledInSendOrder(t *testing.T) {
	const senders, perSender = 6, 300
	var mu sync.Mutex
	last := map[string]int{} // key/sender -> last seq
	var disorder []string
	var handled atomic.Int64
	def := actor.Define("ordered", func(c *actor.Context[int, Msg], m Msg) error {
		n := m.(Note)
		id := fmt.Sprintf("%s/%d", c.Key(), n.Sender)
		mu.Lock()
		if prev, ok := last[id]; ok && n.Seq != prev+1 || !ok && n.Seq != 0 {
			disorder = append(disorder, fmt.Sprintf("%s: %d after %d", id, n.Seq, prev))
		}
		last[id] = n.Seq
		mu.Unlock()
		handled.Add(1)
		return nil
	}, actor.WithMailbox(16, actor.Wait)) // a small mailbox: senders also wait for room
	sys := systemtest.NewSystem(t, system.Config{}, def)
	ctx := systemtest.Ctx(t)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			seq := map[string]int{}
			for i := range perSender {
				key := []string{"x", "y"}[(i/7)%2]
				if err := def.Ref(sys, key).Tell(ctx, Note{Sender: s, Seq: seq[key]}); err != nil {
					t.Error(err)
					return
				}
				seq[key]++
			}
		})
	}
	wg.Wait()
	systemtest.WaitUntil(t, "every message is handled", func() bool { return handled.Load() == senders*perSender })
	mu.Lock()
	defer mu.Unlock()
	if len(disorder) > 0 {
		t.Fatalf("per-sender order broken %d times, first: %v", len(disorder), disorder[:min(5, len(disorder))])
	}
}

func TestIdleKeyPassivatesAndTheNextMessageStartsFresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs := systemtest.NewEvents(systemtest.Limit)
		def := probe("idler", nil, nil, actor.WithIdleTimeout(time.Second))
		sys := systemtest.NewSystem(t, system.Config{Observer: evs.Observe}, def)
		ctx := context.Background()
		ref := def.Ref(sys, "k")
		for _, op := range []string{"a", "b"} {
			if got, err := actor.Ask(ctx, ref, Do{Op: op}); err != nil || got == "" {
				t.Fatal(got, err)
			}
		}
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if n := evs.Count(systemtest.Is(system.ActivationEnded, "k")); n != 0 {
			t.Fatalf("the key idled out before its idle timeout")
		}
		if st := sys.Stats(); st.Active != 1 {
			t.Fatalf("Stats.Active = %d before the idle timeout, want 1", st.Active)
		}
		// Within the timeout, plus the linger before its goroutine
		// exits, plus up to a sweep period (a quarter) before a sweep
		// stamps it idle and another before the sweep that passivates it.
		time.Sleep(time.Second/2 + 3*system.DefaultLinger)
		synctest.Wait()
		evs2 := evs.Snapshot()
		if len(evs2) != 2 || evs2[1].Kind != system.ActivationEnded || evs2[1].Reason != "idle" {
			t.Fatalf("events = %v, want started then ended (idle)", evs2)
		}
		if st := sys.Stats(); st.Active != 0 {
			t.Errorf("Stats.Active = %d after passivation, want 0", st.Active)
		}
		if got, err := actor.Ask(ctx, ref, Do{Op: "again"}); err != nil || got != "again 1" {
			t.Errorf("after passivation Ask = %q, %v; want the initial state again", got, err)
		}
		if n := evs.Count(systemtest.Is(system.ActivationStarted, "k")); n != 2 {
			t.Errorf("ActivationStarted events = %d, want 2", n)
		}
	})
}

func TestIdleActivationsHoldNoGoroutine(t *testing.T) {
	const keys = 300
	def := probe("many", nil, nil)
	sys := systemtest.NewSystem(t, system.Config{Linger: time.Millisecond}, def)
	base := runtime.NumGoroutine()
	ctx := systemtest.Ctx(t)
	for i := range keys {
		if err := def.Ref(sys, fmt.Sprint(i)).Tell(ctx, Note{}); err != nil {
			t.Fatal(err)
		}
	}
	systemtest.WaitUntil(t, "the activations' goroutines to leave", func() bool { return runtime.NumGoroutine() <= base })
	if st := sys.Stats(); st.Active != keys {
		t.Errorf("Stats.Active = %d, want %d idle but active keys", st.Active, keys)
	}
}

// stamped defines an actor that logs "<op>@<time since start>" (fake
// time under synctest) and fails on "error".
func stamped(name string, l *opLog, start *time.Time, opts ...actor.Option) *actor.Def[int, Msg] {
	return actor.Define(name, func(c *actor.Context[int, Msg], m Msg) error {
		op := opOf(m)
		l.add(fmt.Sprintf("%s@%v", op, time.Since(*start)))
		switch op {
		case "error":
			return errBroken
		case "panic":
			panic("boom")
		case "sleep":
			time.Sleep(10 * time.Millisecond)
		}
		c.Update(func(n int) int { return n + 1 })
		if d, ok := m.(Do); ok {
			return actor.Respond(c, d, fmt.Sprint(c.State()))
		}
		return nil
	}, opts...)
}

func TestFailedKeyRestartsAfterBackoffFromItsLastStateWithItsMailbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, evs := &opLog{}, systemtest.NewEvents(systemtest.Limit)
		var start time.Time
		def := stamped("restarting", l, &start, actor.WithBackoff(100*time.Millisecond, 300*time.Millisecond))
		sys := systemtest.NewSystem(t, system.Config{Observer: evs.Observe}, def)
		ctx := context.Background()
		ref := def.Ref(sys, "k")
		start = time.Now()
		// All queued at once, behind the first: the failures must not lose
		// what waits behind them, nor reorder it.
		for _, op := range []string{"sleep", "a", "error", "b", "panic", "c", "d", "error", "e"} {
			if err := ref.Tell(ctx, Note{Op: op}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := actor.Ask(ctx, ref, Do{Op: "get"})
		if err != nil {
			t.Fatal(err)
		}
		// State: one per message that did not fail (sleep a b c d e get),
		// kept across restarts.
		if got != "7" {
			t.Errorf("state after restarts = %s, want 7", got)
		}
		want := []string{
			"sleep@0s", "a@10ms", "error@10ms",
			"b@110ms",                // after a failure: backoff 100ms
			"panic@110ms", "c@210ms", // b succeeded, so not doubled
			"d@210ms", "error@210ms", "e@310ms",
			"get@310ms",
		}
		if !slices.Equal(l.get(), want) {
			t.Errorf("handled\n%v\nwant\n%v", l.get(), want)
		}
		if n := evs.Count(systemtest.Is(system.ActivationFailed, "k")); n != 3 {
			t.Errorf("ActivationFailed events = %d, want 3", n)
		}
		if r := sys.Stats().Restarts; r != 3 {
			t.Errorf("Stats.Restarts = %d, want 3", r)
		}
	})
}

func TestBackoffIsCappedAtItsMaximum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &opLog{}
		var start time.Time
		def := stamped("capped", l, &start, actor.WithBackoff(100*time.Millisecond, 250*time.Millisecond))
		sys := systemtest.NewSystem(t, system.Config{}, def)
		ref := def.Ref(sys, "k")
		start = time.Now()
		for _, op := range []string{"error", "error", "error", "error"} {
			if err := ref.Tell(context.Background(), Note{Op: op}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := actor.Ask(context.Background(), ref, Do{Op: "get"}); err != nil {
			t.Fatal(err)
		}
		want := []string{"error@0s", "error@100ms", "error@300ms", "error@550ms", "get@800ms"}
		if !slices.Equal(l.get(), want) {
			t.Errorf("handled %v, want %v", l.get(), want)
		}
	})
}

func TestEventKindsPrint(t *testing.T) {
	for k, want := range map[system.EventKind]string{
		system.ActivationStarted: "activation-started",
		system.ActivationEnded:   "activation-ended",
		system.ActivationFailed:  "activation-failed",
		system.MessageDropped:    "message-dropped",
		system.MailboxFull:       "mailbox-full",
		system.EventKind(0):      "unknown",
	} {
		if k.String() != want {
			t.Errorf("EventKind(%d).String() = %q, want %q", k, k.String(), want)
		}
	}
}

func TestObserverReportsActivationFailureWithTheCause(t *testing.T) {
	evs := systemtest.NewEvents(systemtest.Limit)
	def := probe("obs", nil, nil, actor.WithBackoff(time.Millisecond, time.Millisecond))
	sys := systemtest.NewSystem(t, system.Config{Observer: evs.Observe}, def)
	if err := def.Ref(sys, "k").Tell(systemtest.Ctx(t), Note{Op: "error"}); err != nil {
		t.Fatal(err)
	}
	ev := evs.WaitFor(t, "ActivationFailed", systemtest.Is(system.ActivationFailed, "k"))
	if !errorsIs(ev.Err, errBroken) || ev.Actor != (actor.ID{Type: "obs", Key: "k"}) {
		t.Errorf("ActivationFailed event = %+v, want the handler's error for obs/k", ev)
	}
}

func TestStatsReportTheLoad(t *testing.T) {
	g := newGate()
	def := probe("loaded", g, nil, actor.WithBackoff(time.Millisecond, time.Millisecond))
	sys := systemtest.NewSystem(t, system.Config{}, def)
	ctx := systemtest.Ctx(t)
	a, b := def.Ref(sys, "a"), def.Ref(sys, "b")
	for _, ref := range []actor.Ref[Msg]{a, b} {
		if err := ref.Tell(ctx, Note{Op: "block"}); err != nil {
			t.Fatal(err)
		}
		systemtest.Recv(t, g.entered, "a handler to block")
	}
	for range 3 {
		if err := a.Tell(ctx, Note{Op: "queued"}); err != nil {
			t.Fatal(err)
		}
	}
	answers := make(chan error, 2)
	for _, ref := range []actor.Ref[Msg]{a, b} {
		go func() {
			_, err := actor.Ask(ctx, ref, Do{Op: "asked"})
			answers <- err
		}()
	}
	want := system.Stats{Active: 2, Queued: 5, DeepestMailbox: 4, AsksInFlight: 2}
	systemtest.WaitUntil(t, fmt.Sprintf("Stats = %+v", want), func() bool { return sys.Stats() == want })
	close(g.open)
	for range 2 {
		if err := systemtest.Recv(t, answers, "the asks"); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Tell(ctx, Note{Op: "error"}); err != nil {
		t.Fatal(err)
	}
	want = system.Stats{Active: 2, Restarts: 1}
	systemtest.WaitUntil(t, fmt.Sprintf("Stats = %+v", want), func() bool { return sys.Stats() == want })
}
