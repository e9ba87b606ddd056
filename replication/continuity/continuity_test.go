package continuity_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/replication/continuity"
	"github.com/troupe-go/troupe/system"
)

func standalone(t *testing.T) *system.System {
	return standaloneWithin(t, continuity.Bounds{})
}

func standaloneWithin(t *testing.T, b continuity.Bounds) *system.System {
	return systemtest.NewSystem(t, system.Config{}, actors(t, b)...)
}

func actors(t *testing.T, b continuity.Bounds) []actor.Definition {
	defs, err := continuity.Actors(b)
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

var charge = continuity.Name{Scope: "payments.charge", Tenant: "acme", Key: "pay-7f3a"}

// The first Submit runs the work; a Submit while it runs is told so; once
// completed, every Submit of the same request gets the record without a
// ticket, and another request under the key is a conflict.
func TestASubmittedRequestRunsOnceAndItsRetriesGetItsResponse(t *testing.T) {
	sys := standalone(t)
	ctx := actor.WithRequestID(systemtest.Ctx(t), "req-1")
	tk, rec, err := continuity.Submit(ctx, sys, charge, []byte("amount=5"), continuity.Options{})
	if err != nil || tk.Attempt != 1 || rec.Phase != continuity.Submitted || rec.RequestID != "req-1" {
		t.Fatalf("first submit: %+v, %+v, %v; want attempt 1, submitted, request req-1", tk, rec, err)
	}
	if _, _, err := continuity.Submit(ctx, sys, charge, []byte("amount=5"), continuity.Options{}); !errors.Is(err, continuity.ErrInProgress) {
		t.Fatalf("a submit while the first attempt holds its lease: %v, want ErrInProgress", err)
	}
	done, err := continuity.Complete(ctx, sys, tk, []byte("charged"))
	if err != nil || done.Phase != continuity.Completed || string(done.Response) != "charged" {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	for range 2 {
		again, rec, err := continuity.Submit(ctx, sys, charge, []byte("amount=5"), continuity.Options{})
		if err != nil || again.Attempt != 0 || string(rec.Response) != "charged" || !rec.Done() {
			t.Fatalf("a retry of the completed request: %+v, %+v, %v; want no ticket and the response", again, rec, err)
		}
	}
	if _, _, err := continuity.Submit(ctx, sys, charge, []byte("amount=6"), continuity.Options{}); !errors.Is(err, continuity.ErrConflict) {
		t.Fatalf("another request under the key: %v, want ErrConflict", err)
	}
	// Completing again with the same response is a retry; another end is not.
	if _, err := continuity.Complete(ctx, sys, tk, []byte("charged")); err != nil {
		t.Fatalf("completing again with the same response: %v", err)
	}
	if _, err := continuity.Reject(ctx, sys, tk, "declined"); !errors.Is(err, continuity.ErrStaleAttempt) {
		t.Fatalf("rejecting a completed record: %v, want ErrStaleAttempt", err)
	}
	// The key under another tenant, or without one, names another record.
	other := charge
	other.Tenant = ""
	if tk, _, err := continuity.Submit(ctx, sys, other, []byte("amount=6"), continuity.Options{}); err != nil || tk.Attempt != 1 {
		t.Fatalf("the key without the tenant: %+v, %v; want a record of its own", tk, err)
	}
	got, ok, err := continuity.Get(ctx, sys, charge)
	if err != nil || !ok || got.Phase != continuity.Completed || got.Attempt != 1 {
		t.Fatalf("get: %+v, %v, %v", got, ok, err)
	}
}

// A Submit after the current attempt's lease ended starts the next
// attempt, which fences the previous one: its Complete fails, the new
// one's is kept. A rejected record answers its retries with the rejection.
func TestAnAttemptWhoseLeaseEndedIsFencedByTheNext(t *testing.T) {
	sys := standalone(t)
	ctx := systemtest.Ctx(t)
	short := continuity.Options{Lease: time.Millisecond}
	first, _, err := continuity.Submit(ctx, sys, charge, []byte("r"), short)
	if err != nil {
		t.Fatal(err)
	}
	var second continuity.Ticket
	systemtest.WaitUntil(t, "a submit after the lease to start attempt 2", func() bool {
		tk, _, err := continuity.Submit(ctx, sys, charge, []byte("r"), short)
		if err != nil && !errors.Is(err, continuity.ErrInProgress) {
			t.Fatal(err)
		}
		second = tk
		return err == nil
	})
	if second.Attempt != 2 {
		t.Fatalf("the submit after the lease started attempt %d, want 2", second.Attempt)
	}
	if _, err := continuity.Complete(ctx, sys, first, []byte("late")); !errors.Is(err, continuity.ErrStaleAttempt) {
		t.Fatalf("the fenced attempt's complete: %v, want ErrStaleAttempt", err)
	}
	if rec, err := continuity.Reject(ctx, sys, second, "declined"); err != nil || rec.Phase != continuity.Rejected || rec.Reason != "declined" {
		t.Fatalf("the current attempt's reject: %+v, %v", rec, err)
	}
	if tk, rec, err := continuity.Submit(ctx, sys, charge, []byte("r"), short); err != nil || tk.Attempt != 0 || rec.Phase != continuity.Rejected {
		t.Fatalf("a retry of the rejected request: %+v, %+v, %v; want the rejection", tk, rec, err)
	}
}

// An ended record is forgotten after its retention; a submitted one is
// not; ending what was never submitted fails.
func TestAnEndedRecordIsForgottenAfterItsRetention(t *testing.T) {
	sys := standalone(t)
	ctx := systemtest.Ctx(t)
	keep := continuity.Options{Retain: 20 * time.Millisecond}
	tk, _, err := continuity.Submit(ctx, sys, charge, []byte("r"), keep)
	if err != nil {
		t.Fatal(err)
	}
	pending := charge
	pending.Key = "pending"
	if _, _, err := continuity.Submit(ctx, sys, pending, []byte("r"), keep); err != nil {
		t.Fatal(err)
	}
	if _, err := continuity.Complete(ctx, sys, tk, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	systemtest.WaitUntil(t, "the completed record to be forgotten", func() bool {
		_, ok, err := continuity.Get(ctx, sys, charge)
		if err != nil {
			t.Fatal(err)
		}
		return !ok
	})
	if rec, ok, err := continuity.Get(ctx, sys, pending); err != nil || !ok || rec.Phase != continuity.Submitted {
		t.Fatalf("the submitted record after the retention: %+v, %v, %v; want it kept", rec, ok, err)
	}
	if _, err := continuity.Complete(ctx, sys, tk, []byte("ok")); !errors.Is(err, continuity.ErrNotFound) {
		t.Fatalf("completing a forgotten record: %v, want ErrNotFound", err)
	}
}

func TestNamesThatCannotNameARecordAreRefused(t *testing.T) {
	sys := standalone(t)
	ctx := systemtest.Ctx(t)
	for _, n := range []continuity.Name{
		{Scope: "", Key: "k"},
		{Scope: "s", Key: ""},
		{Scope: "has space", Key: "k"},
		{Scope: "s", Tenant: "t t", Key: "k"},
		{Scope: "s", Key: strings.Repeat("k", 256)},
		{Scope: strings.Repeat("s", 65), Key: "k"},
		{Scope: "s", Key: "tab\t"},
	} {
		if _, _, err := continuity.Submit(ctx, sys, n, nil, continuity.Options{}); !errors.Is(err, continuity.ErrInvalid) {
			t.Errorf("submit of %+v: %v, want ErrInvalid", n, err)
		}
		if _, _, err := continuity.Get(ctx, sys, n); !errors.Is(err, continuity.ErrInvalid) {
			t.Errorf("get of %+v: %v, want ErrInvalid", n, err)
		}
	}
	if _, err := continuity.Complete(ctx, sys, continuity.Ticket{Name: charge}, nil); !errors.Is(err, continuity.ErrStaleAttempt) {
		t.Errorf("complete with a ticket without an attempt: %v, want ErrStaleAttempt", err)
	}
}

// A record outlives its owner: the member that owned it is killed, and
// the others answer from the replicas, the fence (ErrStaleAttempt) and
// the conflict keeping their identity across members.
func TestARecordOutlivesItsOwnersCrash(t *testing.T) {
	nets := make([]*systemtest.Net, 3)
	for i := range nets {
		nets[i] = &systemtest.Net{}
	}
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) { nets[i].Attach(t, cfg) }, actors(t, continuity.Bounds{})...)
	ctx := systemtest.Ctx(t)
	tk, _, err := continuity.Submit(ctx, systems[0], charge, []byte("r"), continuity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := continuity.Complete(ctx, systems[1], tk, []byte("charged")); err != nil {
		t.Fatal(err)
	}
	owner := -1
	for i, s := range systems {
		if s.Stats().Active > 0 {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no member holds the record active")
	}
	systemtest.Crash(systems[owner], nets[owner])
	rest := systems[(owner+1)%3]
	systemtest.Await(t, func() error {
		tk, rec, err := continuity.Submit(ctx, rest, charge, []byte("r"), continuity.Options{})
		if err != nil {
			return err
		}
		if tk.Attempt != 0 || string(rec.Response) != "charged" {
			t.Fatalf("after the owner's crash a retry got %+v, %+v; want the completed record", tk, rec)
		}
		return nil
	})
	if _, _, err := continuity.Submit(ctx, rest, charge, []byte("other"), continuity.Options{}); !errors.Is(err, continuity.ErrConflict) {
		t.Fatalf("another request on the new owner: %v, want ErrConflict", err)
	}
	if _, err := continuity.Reject(ctx, rest, tk, "late"); !errors.Is(err, continuity.ErrStaleAttempt) {
		t.Fatalf("ending the completed record again on the new owner: %v, want ErrStaleAttempt", err)
	}
}

// An ended record holds no timer of its own: it passivates like any idle
// key, and its member's ledger, not a timer of the record, forgets it
// when its retention ends, without the record being used again.
func TestAnEndedRecordPassivatesAndItsLedgerForgetsItAfterItsRetention(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{IdleTimeout: 50 * time.Millisecond}, actors(t, continuity.Bounds{})...)
	ctx := systemtest.Ctx(t)
	long, short := charge, charge
	long.Key, short.Key = "kept-a-day", "kept-briefly"
	for _, c := range []struct {
		n      continuity.Name
		retain time.Duration
	}{{long, continuity.DefaultRetain}, {short, 200 * time.Millisecond}} {
		tk, _, err := continuity.Submit(ctx, sys, c.n, []byte("r"), continuity.Options{Retain: c.retain})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := continuity.Complete(ctx, sys, tk, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	// Only the ledger stays active: both records passivated or were forgotten.
	systemtest.WaitUntil(t, "the ended records to leave memory and the brief one its ledger", func() bool {
		u, err := continuity.UsageOf(ctx, sys, "")
		if err != nil {
			t.Fatal(err)
		}
		return sys.Stats().Active == 1 && u.Records == 1
	})
	if _, ok, err := continuity.Get(ctx, sys, short); err != nil || ok {
		t.Fatalf("the record past its retention: found %v, %v; want it forgotten", ok, err)
	}
	if rec, ok, err := continuity.Get(ctx, sys, long); err != nil || !ok || rec.Phase != continuity.Completed {
		t.Fatalf("the record within its retention: %+v, %v, %v; want it completed", rec, ok, err)
	}
}

// A Submit that finds an ended record past its retention (its ledger
// gone with a restart, so nobody evicted it) makes a new record in its
// place: stored, so that the work it admits can complete it.
func TestASubmitAfterARestartPastTheRetentionStoresTheNewRecord(t *testing.T) {
	dir := t.TempDir()
	ctx := systemtest.Ctx(t)
	const retain = 50 * time.Millisecond
	first, err := system.New(system.Config{DataDir: dir, Actors: actors(t, continuity.Bounds{})})
	if err != nil {
		t.Fatal(err)
	}
	tk, _, err := continuity.Submit(ctx, first, charge, []byte("r"), continuity.Options{Retain: retain})
	if err != nil {
		t.Fatal(err)
	}
	done, err := continuity.Complete(ctx, first, tk, []byte("ok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	systemtest.WaitUntil(t, "the retention to pass", func() bool { return time.Since(done.Updated) > retain })
	again := systemtest.NewSystem(t, system.Config{DataDir: dir}, actors(t, continuity.Bounds{})...)
	tk, rec, err := continuity.Submit(ctx, again, charge, []byte("r"), continuity.Options{})
	if err != nil || tk.Attempt != 1 || rec.Phase != continuity.Submitted {
		t.Fatalf("a Submit of the forgotten key: %+v, %+v, %v; want attempt 1 to run", tk, rec, err)
	}
	if got, ok, err := continuity.Get(ctx, again, charge); err != nil || !ok || got.Phase != continuity.Submitted {
		t.Fatalf("the new record: %+v, found %v, %v; want it stored as submitted", got, ok, err)
	}
	if _, err := continuity.Complete(ctx, again, tk, []byte("ok")); err != nil {
		t.Fatalf("completing the new record: %v", err)
	}
}
