package system_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// StrictMsg is the message of strictDef.
type StrictMsg interface{ strictMsg() }

// SAdd adds N and answers the count.
type SAdd struct {
	actor.Reply[StrictMsg, int]
	N int
}

// SAttempt adds one; its first run anywhere waits until its context ends
// (its owner crashes meanwhile), later runs answer their attempt.
type SAttempt struct{ actor.Reply[StrictMsg, int] }

func (SAdd) strictMsg()     {}
func (SAttempt) strictMsg() {}

// strictDef counts its handler's runs in runs; entered hears the first
// run of an SAttempt.
func strictDef(runs *atomic.Int32, entered chan<- struct{}, opts ...actor.Option) *actor.Def[int, StrictMsg] {
	opts = append([]actor.Option{actor.WithReplicas(3, actor.WriteMajority)}, opts...)
	return actor.Define("strict", func(c *actor.Context[int, StrictMsg], m StrictMsg) error {
		n := runs.Add(1)
		switch m := m.(type) {
		case SAdd:
			c.Update(func(s int) int { return s + m.N })
			return actor.Respond(c, m, c.State())
		case SAttempt:
			if n == 1 {
				entered <- struct{}{}
				<-c.Done()
				return c.Err()
			}
			c.Update(func(s int) int { return s + 1 })
			return actor.Respond(c, m, c.Attempt())
		}
		return nil
	}, opts...).WithMessages(SAdd{}, SAttempt{})
}

// An actor under strict durability whose replicas are out of reach
// refuses asks, keyed or not, with ErrNotAdmitted, and never runs their
// handler.
func TestAStrictActorRefusesWhatItCannotAdmitWithoutRunningIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []actor.Option
		config bool
	}{
		{name: "definition", opts: []actor.Option{actor.StrictDurability()}},
		{name: "system", config: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			refused(t, strictDef(&runs, nil, tc.opts...), &runs, tc.config)
		})
	}
}

// refused runs TestAStrictActorRefusesWhatItCannotAdmitWithoutRunningIt
// on a cluster of its own, strict by the definition or, with config, by
// the system's config.
func refused(t *testing.T, def *actor.Def[int, StrictMsg], runs *atomic.Int32, config bool) {
	t.Helper()
	nets := make([]*systemtest.Net, 5)
	for i := range nets {
		nets[i] = &systemtest.Net{}
	}
	systems := systemtest.StartCluster(t, 5, func(i int, cfg *system.Config) {
		nets[i].Attach(t, cfg)
		cfg.StrictDurability = config
	}, def)
	key, replicas := ownedByFirstReplica(t, systems[0], "strict", 3)
	owner, _ := byAddr(t, systems, replicas[0])
	ref := def.Ref(owner, key)
	if got, err := actor.Ask(systemtest.Ctx(t), ref, SAdd{N: 1}); err != nil || got != 1 {
		t.Fatalf("add with every replica up: %d, %v; want 1", got, err)
	}
	if got, err := actor.Ask(keyed(t, "k1"), ref, SAdd{N: 1}); err != nil || got != 2 {
		t.Fatalf("keyed add with every replica up: %d, %v; want 2", got, err)
	}
	for _, addr := range replicas[1:] {
		_, i := byAddr(t, systems, addr)
		nets[i].Cut()
	}
	before := runs.Load()
	// Asked on the owner, and through a member that is no replica (the
	// refusal crosses the wire).
	var other *system.System
	for _, s := range systems {
		if !slices.Contains(replicas, s.Addr()) {
			other = s
		}
	}
	for i, ctx := range []context.Context{context.Background(), actor.WithIdempotencyKey(context.Background(), "k2"), context.Background()} {
		at := ref
		if i == 2 {
			at = def.Ref(other, key)
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := actor.Ask(ctx, at, SAdd{N: 1})
		cancel()
		if !errors.Is(err, actor.ErrNotAdmitted) || !errors.Is(err, actor.ErrUnavailable) {
			t.Fatalf("add %d to a strict actor whose replicas are cut off: %d, %v; want ErrNotAdmitted", i, got, err)
		}
	}
	if n := runs.Load(); n != before {
		t.Fatalf("the handler ran %d times for asks that were not admitted", n-before)
	}
}

// A keyed ask admitted under strict durability whose owner crashed
// mid-handler runs again on the new owner as its second attempt.
func TestAKeyedAskToAStrictActorRunsAgainAsItsNextAttemptAfterItsOwnerCrashed(t *testing.T) {
	var runs atomic.Int32
	entered := make(chan struct{}, 1)
	def := strictDef(&runs, entered, actor.StrictDurability())
	systems, nets := replicatedCluster(t, 3, def)
	owner, i := byAddr(t, systems, system.OwnerOf(systems[0], "strict", "k"))
	rest := without(systems, owner)
	var got int
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err = actor.Ask(keyed(t, "pay"), def.Ref(rest[0], "k"), SAttempt{})
	}()
	recvSignal(t, entered, "the first attempt to start")
	systemtest.Crash(owner, nets[i])
	<-done
	if err != nil || got != 2 {
		t.Fatalf("a keyed ask admitted and in flight when its owner crashed: attempt %d, %v; want attempt 2, on the new owner", got, err)
	}
	// Its answer is kept: a retry gets attempt 2 again, without a run.
	ran := runs.Load()
	if again, err := actor.Ask(keyed(t, "pay"), def.Ref(rest[1], "k"), SAttempt{}); err != nil || again != 2 {
		t.Fatalf("the retry of a completed keyed ask: %d, %v; want the kept answer, attempt 2", again, err)
	}
	if n := runs.Load(); n != ran {
		t.Fatalf("a retry ran the handler again (%d runs)", n-ran)
	}
}

func TestStrictDurabilityNeedsAnActorThatKeepsItsState(t *testing.T) {
	def := actor.Define("loose", func(c *actor.Context[int, SAdd], m SAdd) error { return nil }, actor.StrictDurability())
	var de *actor.DefinitionError
	if err := def.Err(); !errors.As(err, &de) || de.Field != "StrictDurability" {
		t.Fatalf("StrictDurability on an actor that keeps no state: %v, want a *DefinitionError naming it", err)
	}
	one := actor.Define("one", func(c *actor.Context[int, SAdd], m SAdd) error { return nil },
		actor.WithReplicas(3, actor.WriteOne), actor.StrictDurability())
	if err := one.Err(); !errors.As(err, &de) || de.Field != "StrictDurability" {
		t.Fatalf("StrictDurability at WriteOne: %v, want a *DefinitionError naming it", err)
	}
}
