package system_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/system"
)

// KAdd adds N and answers the count (N 0 reads it).
type KAdd struct {
	actor.Reply[KAdd, int]
	N int
}

// keptCounter is a durable counter that counts its handler's runs.
func keptCounter(runs *atomic.Int32) *actor.Def[int, KAdd] {
	return actor.Define("kept", func(c *actor.Context[int, KAdd], m KAdd) error {
		runs.Add(1)
		if m.N != 0 { // adding nothing writes nothing: a read
			c.Update(func(n int) int { return n + m.N })
		}
		return actor.Respond(c, m, c.State())
	}, actor.Durable())
}

// awaitNoKept waits until the store holds no kept answer for keys.
func awaitNoKept(t *testing.T, sys *system.System, keys []string) {
	t.Helper()
	systemtest.Await(t, func() error {
		if stored := storedKept(t, sys, keys); stored != 0 {
			return fmt.Errorf("the store holds %d kept answers past their retention, want 0", stored)
		}
		return nil
	})
}

// storedKept sums the kept answers the store holds for keys.
func storedKept(t *testing.T, sys *system.System, keys []string) int {
	t.Helper()
	total := 0
	for _, k := range keys {
		n, _, err := system.StoredKept(systemtest.Ctx(t), sys, "kept", k)
		if err != nil {
			t.Fatalf("read %s's record: %v", k, err)
		}
		total += n
	}
	return total
}

func TestAMemberKeepsAtMostItsBoundOfAnswersTheOldestGoingFirst(t *testing.T) {
	const bound, keys, rounds = 50, 20, 10
	var runs atomic.Int32
	def := keptCounter(&runs)
	sys := newStandalone(t, system.Config{KeptAnswers: replication.KeptAnswers{MaxAnswers: bound}}, def)
	names := make([]string, keys)
	for k := range names {
		names[k] = fmt.Sprintf("acct-%d", k)
	}
	for r := range rounds {
		for k, name := range names {
			if _, err := actor.Ask(keyed(t, fmt.Sprintf("r%d-k%d", r, k)), def.Ref(sys, name), KAdd{N: 1}); err != nil {
				t.Fatalf("keyed add r%d to %s: %v", r, name, err)
			}
		}
	}
	// Settled: the ledger counts what the store holds (every prune it
	// sent was written and noted), within the bound.
	systemtest.Await(t, func() error {
		stored := storedKept(t, sys, names)
		if counted, _ := system.KeptUsage(sys); counted != stored || stored > bound {
			return fmt.Errorf("the store holds %d kept answers and the ledger counts %d; want them equal and at most %d", stored, counted, bound)
		}
		return nil
	})
	if stored := storedKept(t, sys, names); stored < keys {
		t.Fatalf("the store holds %d kept answers, want at least the newest of each of %d keys", stored, keys)
	}
	// The newest answers are kept: their retries do not run.
	for k, name := range names {
		got, err := actor.Ask(keyed(t, fmt.Sprintf("r%d-k%d", rounds-1, k)), def.Ref(sys, name), KAdd{N: 1})
		if err != nil || got != rounds {
			t.Fatalf("retry of the last keyed add to %s: %d, %v; want %d, its kept answer", name, got, err, rounds)
		}
	}
	if n := runs.Load(); n != keys*rounds {
		t.Fatalf("the handler ran %d times, want %d: a retry of a newest answer ran", n, keys*rounds)
	}
	// An answer evicted by the bound is forgotten: its retry runs again.
	if got, err := actor.Ask(keyed(t, "r0-k0"), def.Ref(sys, names[0]), KAdd{N: 1}); err != nil || got != rounds+1 {
		t.Fatalf("retry of the first keyed add: %d, %v; want %d, a new run", got, err, rounds+1)
	}
	if n := runs.Load(); n != keys*rounds+1 {
		t.Fatalf("the handler ran %d times, want %d: the evicted answer's retry did not run", n, keys*rounds+1)
	}
}

func TestAnswersPastTheirRetentionLeaveIdleKeysRecords(t *testing.T) {
	const keys = 5
	var runs atomic.Int32
	var ended atomic.Int32
	def := keptCounter(&runs)
	cfg := system.Config{
		KeptAnswers: replication.KeptAnswers{Retain: time.Second},
		IdleTimeout: 20 * time.Millisecond,
		Observer: func(e system.Event) {
			if e.Kind == system.ActivationEnded && e.Reason == "idle" {
				ended.Add(1)
			}
		},
	}
	sys := newStandalone(t, cfg, def)
	names := make([]string, keys)
	for k := range names {
		names[k] = fmt.Sprintf("acct-%d", k)
		if _, err := actor.Ask(keyed(t, "once"), def.Ref(sys, names[k]), KAdd{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if stored := storedKept(t, sys, names); stored != keys {
		t.Fatalf("the store holds %d kept answers after %d keyed asks, want %d", stored, keys, keys)
	}
	systemtest.Await(t, func() error {
		if n := ended.Load(); n < keys {
			return fmt.Errorf("%d of %d keys passivated", n, keys)
		}
		return nil
	})
	// No message reaches the keys again: the ledger's timer prunes them.
	awaitNoKept(t, sys, names)
	if n := runs.Load(); n != keys {
		t.Fatalf("the handler ran %d times, want %d: the prunes ran it", n, keys)
	}
}

func TestTheLedgerLeavesAKeyThisMemberDoesNotOwn(t *testing.T) {
	def := counterDef("counter", nil, actor.WithReplicas(2, actor.WriteMajority))
	systems, _ := replicatedCluster(t, 2, def)
	owner, _ := byAddr(t, systems, system.OwnerOf(systems[0], "counter", "k"))
	other := without(systems, owner)[0]
	// A keyed add leaves an answer on the owner (and confirms it owns
	// the key: a new member's keys wait for their hand-off until used).
	if _, err := actor.Ask(keyed(t, "pay"), def.Ref(other, "k"), DAdd{N: 1}); err != nil {
		t.Fatal(err)
	}
	if kept, _, err := system.StoredKept(systemtest.Ctx(t), owner, "counter", "k"); err != nil || kept != 1 {
		t.Fatalf("the owner's record keeps %d answers (%v) after a keyed add, want 1", kept, err)
	}
	before := time.Now().UnixNano()
	n := system.ActivatedAt(other)
	system.PruneKeptAt(other, "counter", "k", before)
	if got := system.ActivatedAt(other); got != n {
		t.Fatalf("a prune on a member that does not own the key activated %d keys there, want none", got-n)
	}
	// The owner takes it, as a message of the key: its answer goes.
	system.PruneKeptAt(owner, "counter", "k", before)
	systemtest.Await(t, func() error {
		if kept, _, err := system.StoredKept(systemtest.Ctx(t), owner, "counter", "k"); err != nil || kept != 0 {
			return fmt.Errorf("the owner's record keeps %d answers (%v) after a prune past them, want 0", kept, err)
		}
		return nil
	})
}

// TestAPruneOfAKeyWithoutARecordWritesNone: the ledger's hint may name a
// key whose record went since (deleted, say); the prune activates it and
// must not write its initial state back as a record.
func TestAPruneOfAKeyWithoutARecordWritesNone(t *testing.T) {
	var runs atomic.Int32
	def := keptCounter(&runs)
	sys := newStandalone(t, system.Config{}, def)
	if _, err := actor.Ask(keyed(t, "first"), def.Ref(sys, "k"), KAdd{N: 1}); err != nil {
		t.Fatal(err)
	}
	n := system.ActivatedAt(sys)
	system.PruneKeptAt(sys, "kept", "gone", time.Now().UnixNano())
	systemtest.Await(t, func() error {
		if got := system.ActivatedAt(sys); got == n {
			return errors.New("the prune has not activated the key yet")
		}
		return nil
	})
	// A message after the prune step in the same mailbox: once it is
	// answered, the step's commit (if any) is done.
	if _, err := actor.Ask(systemtest.Ctx(t), def.Ref(sys, "gone"), KAdd{N: 0}); err != nil {
		t.Fatal(err)
	}
	if ok, err := system.Stored(systemtest.Ctx(t), sys, "kept", "gone"); err != nil || ok {
		t.Fatalf("a prune of a key without a record left one: %v (%v)", ok, err)
	}
	if runs.Load() != 2 {
		t.Fatalf("the handler ran %d times, want 2: the prune runs none", runs.Load())
	}
}

func TestInvalidKeptAnswersFailNew(t *testing.T) {
	for _, k := range []replication.KeptAnswers{{MaxAnswers: -1}, {MaxBytes: -1}, {Retain: -time.Second}, {Retain: replication.MaxKeptRetention + 1}} {
		_, err := system.New(system.Config{KeptAnswers: k})
		if !errors.Is(err, replication.ErrInvalidConfig) || !errors.Is(err, system.ErrInvalidConfig) {
			t.Fatalf("KeptAnswers %+v: %v, want replication.ErrInvalidConfig within system.ErrInvalidConfig", k, err)
		}
	}
}

func TestAnswersPastTheirRetentionLeaveTheRecordsOfKeysNeverUsedAfterARestart(t *testing.T) {
	const keys = 5
	var runs atomic.Int32
	def := keptCounter(&runs)
	dir := t.TempDir()
	cfg := system.Config{DataDir: dir, KeptAnswers: replication.KeptAnswers{Retain: time.Second}}
	sys := newStandalone(t, cfg, def)
	names := make([]string, keys)
	for k := range names {
		names[k] = fmt.Sprintf("acct-%d", k)
		if _, err := actor.Ask(keyed(t, "once"), def.Ref(sys, names[k]), KAdd{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	closeNow(t, sys)
	// The restarted member's ledger knows of no answer, and no message
	// reaches the keys: its store's wake drops them when they are due.
	sys = newStandalone(t, cfg, def)
	if stored := storedKept(t, sys, names); stored != keys {
		t.Fatalf("the store holds %d kept answers after the restart, want %d", stored, keys)
	}
	awaitNoKept(t, sys, names)
	if n := runs.Load(); n != keys {
		t.Fatalf("the handler ran %d times, want %d: the wakes ran it", n, keys)
	}
}

// The pages of an idle key's older answers leave the store once their
// answers passed the retention, as the answers in its record do.
func TestPagesPastTheirRetentionLeaveAnIdleKey(t *testing.T) {
	var runs atomic.Int32
	def := keptCounter(&runs)
	sys := newStandalone(t, system.Config{KeptAnswers: replication.KeptAnswers{Retain: 2 * time.Second}, IdleTimeout: 20 * time.Millisecond}, def)
	const asks = 300
	for i := range asks {
		if _, err := actor.Ask(keyed(t, fmt.Sprint("pay-", i)), def.Ref(sys, "acct"), KAdd{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if pages, err := system.StoredPages(systemtest.Ctx(t), sys, "kept", "acct"); err != nil || pages == 0 {
		t.Fatalf("%d pages stored after %d keyed asks to one key (%v), want some", pages, asks, err)
	}
	awaitNoKept(t, sys, []string{"acct"})
	if pages, err := system.StoredPages(systemtest.Ctx(t), sys, "kept", "acct"); err != nil || pages != 0 {
		t.Fatalf("%d pages stored past their retention (%v), want none", pages, err)
	}
	if n := runs.Load(); n != asks {
		t.Fatalf("the handler ran %d times, want %d", n, asks)
	}
}
