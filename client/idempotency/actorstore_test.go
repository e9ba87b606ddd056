package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/client/idempotency"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

func TestActorStoreKeepsOneRecordPerScopedKey(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, idempotency.Records)
	st, err := idempotency.NewActorStore(sys, idempotency.ActorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	first := begin(t, st, "k", idempotency.Hash{1})
	if first.Outcome != idempotency.Started || first.Attempt == 0 {
		t.Fatalf("a new key: %+v, want Started with an attempt", first)
	}
	for _, c := range []struct {
		h    idempotency.Hash
		want idempotency.Outcome
	}{{idempotency.Hash{1}, idempotency.InProgress}, {idempotency.Hash{2}, idempotency.Conflict}} {
		if got := begin(t, st, "k", c.h).Outcome; got != c.want {
			t.Fatalf("hash %x while in progress: %v, want %v", c.h[0], got, c.want)
		}
	}
	other := idempotency.Scope{App: scope.App, Route: scope.Route, Tenant: "another"}
	if c, err := st.Begin(systemtest.Ctx(t), other, "k", idempotency.Hash{1}); err != nil || c.Outcome != idempotency.Started {
		t.Fatalf("the same key for another tenant: %+v %v, want Started", c, err)
	}
	complete(t, st, "k", first, "kept")
	if got := begin(t, st, "k", idempotency.Hash{1}); got.Outcome != idempotency.Replay || string(got.Response.Body) != "kept" || got.Response.Status != 200 {
		t.Fatalf("after completion: %+v, want the kept response", got)
	}
	if got := begin(t, st, "k", idempotency.Hash{2}).Outcome; got != idempotency.Conflict {
		t.Fatalf("another hash after completion: %v", got)
	}
	if err := st.Complete(systemtest.Ctx(t), scope, "k", first.Attempt, idempotency.Response{Status: 500}); !errors.Is(err, idempotency.ErrStaleAttempt) {
		t.Fatalf("a second Complete: %v, want ErrStaleAttempt", err)
	}
	for _, cfg := range []idempotency.ActorConfig{{Lease: -1}, {Retention: -1}} {
		if _, err := idempotency.NewActorStore(sys, cfg); !errors.Is(err, idempotency.ErrInvalidConfig) {
			t.Errorf("NewActorStore(%+v): %v", cfg, err)
		}
	}
	if _, err := idempotency.NewActorStore(nil, idempotency.ActorConfig{}); !errors.Is(err, idempotency.ErrInvalidConfig) {
		t.Errorf("NewActorStore(nil): %v", err)
	}
}

func TestActorStoreFencesAnAttemptWhoseLeaseEnded(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, idempotency.Records)
	st, err := idempotency.NewActorStore(sys, idempotency.ActorConfig{Lease: time.Millisecond, Retention: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	old := begin(t, st, "k", idempotency.Hash{1})
	var next idempotency.Claim
	systemtest.WaitUntil(t, "a new attempt after the lease", func() bool {
		next = begin(t, st, "k", idempotency.Hash{1})
		return next.Outcome == idempotency.Started
	})
	if next.Attempt == old.Attempt {
		t.Fatalf("the new attempt reuses the old one's id %d", old.Attempt)
	}
	if err := st.Complete(systemtest.Ctx(t), scope, "k", old.Attempt, idempotency.Response{Status: 200}); !errors.Is(err, idempotency.ErrStaleAttempt) {
		t.Fatalf("the attempt whose lease ended completed: %v", err)
	}
	complete(t, st, "k", next, "new")
	// Past its retention the record is gone: the key starts again, with
	// any hash.
	systemtest.WaitUntil(t, "the record expires", func() bool {
		return begin(t, st, "k", idempotency.Hash{3}).Outcome == idempotency.Started
	})
}

func TestRetriesThroughAnyWebServerSurviveAMemberCrash(t *testing.T) {
	nets := make([]*systemtest.Net, 3)
	for i := range nets {
		nets[i] = &systemtest.Net{}
	}
	members := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) { nets[i].Attach(t, cfg) }, idempotency.Records)
	var runs atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", runs.Add(1))
	})
	// A web server in front of each member, sharing the records.
	servers := make([]http.Handler, len(members))
	for i, m := range members {
		st, err := idempotency.NewActorStore(m, idempotency.ActorConfig{})
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = newMiddleware(t, idempotency.Config{Store: st, App: "shop"}, handler)
	}
	const keys = 12
	first := make([]string, keys)
	for k := range keys {
		w := do(servers[0], http.MethodPost, "/pay", fmt.Sprint("key-", k), "body")
		if w.Code != http.StatusCreated {
			t.Fatalf("key %d: %d %q", k, w.Code, w.Body)
		}
		first[k] = w.Body.String()
	}
	// Some of the records' owners go with the crash; every record has
	// copies on the two others.
	systemtest.Crash(members[1], nets[1])
	for k := range keys {
		systemtest.Await(t, func() error {
			w := do(servers[2], http.MethodPost, "/pay", fmt.Sprint("key-", k), "body")
			if w.Code != http.StatusCreated || w.Body.String() != first[k] || w.Header().Get(idempotency.ReplayedHeader) != "true" {
				return fmt.Errorf("retry of key %d through another server: %d %q, want the replay of %q", k, w.Code, w.Body, first[k])
			}
			return nil
		})
	}
	if n := runs.Load(); n != keys {
		t.Fatalf("the handler ran %d times for %d keys", n, keys)
	}
}

func TestActorStoreRecordsLeaveTheStoresWhenTheyExpire(t *testing.T) {
	evs := systemtest.NewEvents(systemtest.Limit)
	// Records idle out after 50ms: an expiring record sleeps in the
	// store until its timer wakes it.
	sys := systemtest.NewSystem(t, system.Config{Observer: evs.Observe, IdleTimeout: 50 * time.Millisecond}, idempotency.Records)
	const retention = time.Second
	st, err := idempotency.NewActorStore(sys, idempotency.ActorConfig{Lease: 200 * time.Millisecond, Retention: retention})
	if err != nil {
		t.Fatal(err)
	}
	ended := func(reason string) func(system.Event) bool {
		return func(e system.Event) bool {
			return e.Kind == system.ActivationEnded && e.Actor.Type == idempotency.Records.Name() && e.Reason == reason
		}
	}
	done := time.Now()
	complete(t, st, "done", begin(t, st, "done", idempotency.Hash{1}), "kept")
	begin(t, st, "abandoned", idempotency.Hash{2}) // its server died: never completed
	systemtest.WaitUntil(t, "both records to idle out", func() bool { return evs.Count(ended("idle")) == 2 })
	if n := evs.Count(ended("deleted")); n != 0 {
		t.Fatalf("%d records deleted before their retention", n)
	}
	systemtest.WaitUntil(t, "both records to delete themselves, no request using them", func() bool { return evs.Count(ended("deleted")) == 2 })
	if since := time.Since(done); since < retention {
		t.Fatalf("records deleted %v after completion, before their retention (%v)", since, retention)
	}
	// Gone, they start again with any hash.
	for _, k := range []string{"done", "abandoned"} {
		if got := begin(t, st, k, idempotency.Hash{3}).Outcome; got != idempotency.Started {
			t.Fatalf("%s after its expiry: %v, want Started", k, got)
		}
	}
}

// An ExpireRecord that comes before the record's retention (sent by
// someone, or a timer whose clock went back) leaves the record, which
// expires when its retention ends.
func TestAnEarlyExpireRecordLeavesTheRecordUntilItsRetention(t *testing.T) {
	sys := systemtest.NewSystem(t, system.Config{}, idempotency.Records)
	const retention = 500 * time.Millisecond
	st, err := idempotency.NewActorStore(sys, idempotency.ActorConfig{Lease: time.Second, Retention: retention})
	if err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	complete(t, st, "k", begin(t, st, "k", idempotency.Hash{1}), "kept")
	if err := idempotency.Records.Ref(sys, idempotency.RecordKey(scope, "k")).Tell(context.Background(), idempotency.ExpireRecord{}); err != nil {
		t.Fatal(err)
	}
	if got := begin(t, st, "k", idempotency.Hash{1}).Outcome; got != idempotency.Replay {
		t.Fatalf("a retry after an early ExpireRecord: %v, want Replay", got)
	}
	systemtest.WaitUntil(t, "the record to expire", func() bool {
		return begin(t, st, "k", idempotency.Hash{2}).Outcome != idempotency.Conflict
	})
	if since := time.Since(done); since < retention {
		t.Fatalf("the record expired %v after completion, before its retention (%v)", since, retention)
	}
}
