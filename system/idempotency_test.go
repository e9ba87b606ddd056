package system_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// keyed returns the test's context naming key as the idempotency key.
func keyed(t testing.TB, key string) context.Context {
	return actor.WithIdempotencyKey(systemtest.Ctx(t), key)
}

func TestAKeyedAskRunsOnceAndItsRetriesGetItsAnswer(t *testing.T) {
	def := counterDef("idem", nil, actor.Durable())
	sys := newStandalone(t, system.Config{}, def)
	ref := def.Ref(sys, "acct")
	for i := range 3 {
		got, err := actor.Ask(keyed(t, "pay-1"), ref, DAdd{N: 5})
		if err != nil || got != 5 {
			t.Fatalf("keyed add, try %d: %d, %v; want 5, the first answer", i+1, got, err)
		}
	}
	if got := get(t, ref); got != 5 {
		t.Fatalf("after three tries of one keyed add of 5 the count is %d, want 5", got)
	}
	if got, err := actor.Ask(keyed(t, "pay-2"), ref, DAdd{N: 5}); err != nil || got != 10 {
		t.Fatalf("an add with another key: %d, %v; want 10", got, err)
	}
	// The same key on another actor names another request.
	if got, err := actor.Ask(keyed(t, "pay-1"), def.Ref(sys, "other"), DAdd{N: 2}); err != nil || got != 2 {
		t.Fatalf("key pay-1 on another actor: %d, %v; want 2", got, err)
	}
}

// A tenant scopes keys: the same key under two tenants names two
// requests, under one the same request, also across members, where the
// scoped key crosses the wire. A tenant that cannot be one is refused.
func TestATenantScopesIdempotencyKeys(t *testing.T) {
	def := counterDef("counter", nil, actor.WithReplicas(3, actor.WriteMajority))
	systems, _ := replicatedCluster(t, 3, def)
	owner, _ := byAddr(t, systems, system.OwnerOf(systems[0], "counter", "k"))
	other := without(systems, owner)[0]
	for _, sys := range []*system.System{owner, other} {
		ref := def.Ref(sys, "k")
		before := get(t, ref)
		in := func(tenant string) context.Context { return actor.WithTenant(keyed(t, "pay-"+sys.Addr()), tenant) }
		for _, tenant := range []string{"acme", "acme", "globex"} {
			if _, err := actor.Ask(in(tenant), ref, DAdd{N: 1}); err != nil {
				t.Fatalf("keyed add for tenant %s: %v", tenant, err)
			}
		}
		// Without a tenant, the key names a request of its own.
		if _, err := actor.Ask(keyed(t, "pay-"+sys.Addr()), ref, DAdd{N: 1}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, ref) - before; got != 3 {
			t.Fatalf("through %s: adds under tenants acme, acme, globex and none with one key added %d, want 3", sys.Addr(), got)
		}
		// A key's conflict is per tenant.
		if _, err := actor.Ask(in("acme"), ref, DAdd{N: 2}); !errors.Is(err, actor.ErrIdempotencyConflict) {
			t.Fatalf("the key reused for another add under its tenant: %v, want ErrIdempotencyConflict", err)
		}
	}
	for _, bad := range []string{"", "has space", strings.Repeat("t", 65)} {
		ctx := actor.WithTenant(keyed(t, "pay-bad"), bad)
		if _, err := actor.Ask(ctx, def.Ref(other, "k"), DAdd{N: 1}); !errors.Is(err, actor.ErrInvalidIdempotencyKey) {
			t.Fatalf("tenant %q: %v, want ErrInvalidIdempotencyKey", bad, err)
		}
		// An ask without a key ignores the tenant.
		if _, err := actor.Ask(actor.WithTenant(systemtest.Ctx(t), bad), def.Ref(other, "k"), DGet{}); err != nil {
			t.Fatalf("an ask without a key under tenant %q: %v", bad, err)
		}
	}
}

func TestAKeyReusedForAnotherRequestFailsWithAConflict(t *testing.T) {
	def := counterDef("idem", nil, actor.Durable())
	sys := newStandalone(t, system.Config{}, def)
	ref := def.Ref(sys, "acct")
	if _, err := actor.Ask(keyed(t, "k"), ref, DAdd{N: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := actor.Ask(keyed(t, "k"), ref, DAdd{N: 2})
	if !errors.Is(err, actor.ErrIdempotencyConflict) {
		t.Fatalf("key k reused for another add: %v, want ErrIdempotencyConflict", err)
	}
	if actor.Temporary(err) {
		t.Fatalf("a conflict is reported as temporary: %v", err)
	}
	if _, err := actor.Ask(keyed(t, "k"), ref, DGet{}); !errors.Is(err, actor.ErrIdempotencyConflict) {
		t.Fatalf("key k reused for another message type: %v, want ErrIdempotencyConflict", err)
	}
	if got := get(t, ref); got != 1 {
		t.Fatalf("after a conflict the count is %d, want 1: the second add ran", got)
	}
}

func TestAKeyedAskIsRefusedWhereNoAnswerCanBeKept(t *testing.T) {
	plain := counterDef("plain", nil)
	durable := counterDef("idem", nil, actor.Durable())
	sys := newStandalone(t, system.Config{}, plain, durable)
	if _, err := actor.Ask(keyed(t, "k"), plain.Ref(sys, "a"), DAdd{N: 1}); !errors.Is(err, actor.ErrIdempotencyUnsupported) {
		t.Fatalf("a keyed ask to a definition that keeps no state: %v, want ErrIdempotencyUnsupported", err)
	}
	if got := get(t, plain.Ref(sys, "a")); got != 0 {
		t.Fatalf("the refused keyed ask ran: the count is %d", got)
	}
	for _, bad := range []string{"", "has space", strings.Repeat("x", 256), "tab\t"} {
		if _, err := actor.Ask(keyed(t, bad), durable.Ref(sys, "a"), DAdd{N: 1}); !errors.Is(err, actor.ErrInvalidIdempotencyKey) {
			t.Fatalf("idempotency key %q: %v, want ErrInvalidIdempotencyKey", bad, err)
		}
	}
	if got := get(t, durable.Ref(sys, "a")); got != 0 {
		t.Fatalf("an ask with an invalid key ran: the count is %d", got)
	}
	// A request id named alongside stays the ask's.
	ctx := actor.WithRequestID(keyed(t, "k2"), "req-7")
	var rid string
	_, err := actor.Ask(ctx, plain.Ref(sys, "a"), DAdd{N: 1})
	if rid = actor.RequestIDOf(err); rid != "req-7" {
		t.Fatalf("the refused ask names request %q, want req-7", rid)
	}
}

func TestAKeptAnswerSurvivesARestartWithItsDataDir(t *testing.T) {
	dir := t.TempDir()
	def := counterDef("idem", nil, actor.Durable())
	sys := newStandalone(t, system.Config{DataDir: dir}, def)
	if got, err := actor.Ask(keyed(t, "once"), def.Ref(sys, "acct"), DAdd{N: 3}); err != nil || got != 3 {
		t.Fatalf("keyed add: %d, %v", got, err)
	}
	closeNow(t, sys)
	sys = newStandalone(t, system.Config{DataDir: dir}, def)
	if got, err := actor.Ask(keyed(t, "once"), def.Ref(sys, "acct"), DAdd{N: 3}); err != nil || got != 3 {
		t.Fatalf("the keyed add retried after a restart: %d, %v; want 3, the kept answer", got, err)
	}
	if got := get(t, def.Ref(sys, "acct")); got != 3 {
		t.Fatalf("after the retry the count is %d, want 3", got)
	}
}

// errDeclined is the declared error of declinerDef.
var errDeclined = errors.New("declined")

// Decline is declinerDef's message: it counts its runs in the state and
// answers errDeclined, or, with Panic, panics.
type Decline struct {
	actor.Reply[Decline, int]
	Panic bool
}

func declinerDef(runs *atomic.Int32) *actor.Def[int, Decline] {
	return actor.Define("decliner", func(c *actor.Context[int, Decline], m Decline) error {
		runs.Add(1)
		c.Update(func(n int) int { return n + 1 })
		if m.Panic {
			panic("boom")
		}
		return errDeclined
	}, actor.Durable(), actor.WithErrors(errDeclined))
}

func TestAKeptErrorOrFailureIsAnsweredAgainWithoutRunning(t *testing.T) {
	var runs atomic.Int32
	def := declinerDef(&runs)
	sys := newStandalone(t, system.Config{}, def)
	ref := def.Ref(sys, "a")
	for i := range 2 {
		if _, err := actor.Ask(keyed(t, "d"), ref, Decline{}); !errors.Is(err, errDeclined) {
			t.Fatalf("try %d: %v, want the declared errDeclined", i+1, err)
		}
	}
	for i := range 2 {
		if _, err := actor.Ask(keyed(t, "p"), ref, Decline{Panic: true}); !errors.Is(err, actor.ErrActorFailed) {
			t.Fatalf("panicking try %d: %v, want ErrActorFailed", i+1, err)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times for two keys tried twice each, want 2", n)
	}
}

func TestAKeyedAskRunsOnceAcrossItsOwnersCrash(t *testing.T) {
	def := counterDef("counter", nil, actor.WithReplicas(3, actor.WriteMajority))
	systems, nets := replicatedCluster(t, 3, def)
	owner, i := byAddr(t, systems, system.OwnerOf(systems[0], "counter", "k"))
	rest := without(systems, owner)
	// Asked through another member: the key crosses the wire.
	if got, err := actor.Ask(keyed(t, "pay"), def.Ref(rest[0], "k"), DAdd{N: 7}); err != nil || got != 7 {
		t.Fatalf("keyed add: %d, %v", got, err)
	}
	systemtest.Crash(owner, nets[i])
	got := eventually(t, "retry the keyed add on the new owner", func(ctx context.Context) (int, error) {
		return actor.Ask(actor.WithIdempotencyKey(ctx, "pay"), def.Ref(rest[1], "k"), DAdd{N: 7})
	})
	if got != 7 {
		t.Fatalf("the keyed add retried after its owner crashed answered %d, want 7, the kept answer", got)
	}
	if got := eventually(t, "read the count", func(ctx context.Context) (int, error) {
		return actor.Ask(ctx, def.Ref(rest[0], "k"), DGet{})
	}); got != 7 {
		t.Fatalf("the count is %d after a keyed add of 7 and its retry, want 7", got)
	}
}

// SlowAdd adds N; the first run anywhere waits until its context ends.
type SlowAdd struct {
	actor.Reply[SlowAdd, int]
	N int
}

func TestAKeyedAskInFlightWhenItsOwnerCrashesRunsOnTheNewOwner(t *testing.T) {
	var runs atomic.Int32
	entered := make(chan struct{}, 1)
	def := actor.Define("slow", func(c *actor.Context[int, SlowAdd], m SlowAdd) error {
		if runs.Add(1) == 1 {
			entered <- struct{}{}
			<-c.Done() // the owner crashes meanwhile
			return c.Err()
		}
		c.Update(func(n int) int { return n + m.N })
		return actor.Respond(c, m, c.State())
	}, actor.WithReplicas(3, actor.WriteMajority))
	systems, nets := replicatedCluster(t, 3, def)
	owner, i := byAddr(t, systems, system.OwnerOf(systems[0], "slow", "k"))
	rest := without(systems, owner)
	var got int
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err = actor.Ask(keyed(t, "pay"), def.Ref(rest[0], "k"), SlowAdd{N: 4})
	}()
	<-entered
	systemtest.Crash(owner, nets[i])
	<-done
	if err != nil || got != 4 {
		t.Fatalf("a keyed ask in flight when its owner crashed: %d, %v; want 4, run again on the new owner", got, err)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2: once abandoned by the crash, once on the new owner", n)
	}
}

// A key keeps the answers of far more keyed asks than its record holds
// (the oldest move to pages of their own, on the same replicas): every
// retry after its owner crashed gets its first answer from the new
// owner, and none runs the handler again.
func TestTheAnswersOfHundredsOfKeyedAsksToOneKeySurviveItsOwnersCrash(t *testing.T) {
	def := counterDef("counter", nil, actor.WithReplicas(3, actor.WriteMajority))
	systems, nets := replicatedCluster(t, 3, def)
	owner, i := byAddr(t, systems, system.OwnerOf(systems[0], "counter", "k"))
	rest := without(systems, owner)
	const asks = 600
	for n := range asks {
		if got, err := actor.Ask(keyed(t, fmt.Sprint("pay-", n)), def.Ref(rest[0], "k"), DAdd{N: 1}); err != nil || got != n+1 {
			t.Fatalf("keyed add %d: %d, %v", n, got, err)
		}
	}
	systemtest.Crash(owner, nets[i])
	for _, n := range []int{0, 1, 200, 470, 471, asks - 1} {
		got := eventually(t, "retry a keyed add on the new owner", func(ctx context.Context) (int, error) {
			return actor.Ask(actor.WithIdempotencyKey(ctx, fmt.Sprint("pay-", n)), def.Ref(rest[1], "k"), DAdd{N: 1})
		})
		if got != n+1 {
			t.Fatalf("keyed add %d retried after its owner crashed answered %d, want %d, its first answer", n, got, n+1)
		}
	}
	if got := eventually(t, "read the count", func(ctx context.Context) (int, error) {
		return actor.Ask(ctx, def.Ref(rest[0], "k"), DGet{})
	}); got != asks {
		t.Fatalf("the count is %d after %d keyed adds of 1 and retries, want %d", got, asks, asks)
	}
}
