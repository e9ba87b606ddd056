package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/client/idempotency"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var scope = idempotency.Scope{App: "a", Route: "/r", Tenant: "t"}

func begin(t *testing.T, st idempotency.Store, key string, h idempotency.Hash) idempotency.Claim {
	t.Helper()
	c, err := st.Begin(context.Background(), scope, key, h)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func complete(t *testing.T, st idempotency.Store, key string, c idempotency.Claim, body string) {
	t.Helper()
	if err := st.Complete(context.Background(), scope, key, c.Attempt, idempotency.Response{Status: 200, Header: http.Header{}, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryStoreKeepsCompletedRecordsForTheirRetention(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	st, err := idempotency.NewMemoryStore(idempotency.MemoryConfig{Retention: time.Hour, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	c := begin(t, st, "k", idempotency.Hash{1})
	if c.Outcome != idempotency.Started {
		t.Fatalf("new key: %v", c.Outcome)
	}
	clock.advance(48 * time.Hour) // a record in progress never expires
	if got := begin(t, st, "k", idempotency.Hash{1}).Outcome; got != idempotency.InProgress {
		t.Fatalf("in progress after 48 h: %v", got)
	}
	complete(t, st, "k", c, "r")
	clock.advance(time.Hour - time.Second)
	if got := begin(t, st, "k", idempotency.Hash{1}); got.Outcome != idempotency.Replay || string(got.Response.Body) != "r" {
		t.Fatalf("within retention: %+v", got)
	}
	if got := begin(t, st, "k", idempotency.Hash{2}).Outcome; got != idempotency.Conflict {
		t.Fatalf("another hash: %v", got)
	}
	clock.advance(time.Second)
	if got := begin(t, st, "k", idempotency.Hash{2}).Outcome; got != idempotency.Started {
		t.Fatalf("after retention: %v, want the key free again", got)
	}
}

func TestMemoryStoreBoundsDropTheOldestCompletedFirst(t *testing.T) {
	st, err := idempotency.NewMemoryStore(idempotency.MemoryConfig{MaxRecords: 3, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pending := begin(t, st, "pending", idempotency.Hash{9})
	for i := range 5 {
		k := fmt.Sprint("k", i)
		complete(t, st, k, begin(t, st, k, idempotency.Hash{}), "r")
	}
	if done, inProgress := st.Len(); done != 3 || inProgress != 1 {
		t.Fatalf("kept %d completed and %d in progress, want 3 and 1", done, inProgress)
	}
	// The newest three are kept; looking up the two oldest starts them
	// anew (in progress, outside the bound).
	for i, want := range []idempotency.Outcome{4: idempotency.Replay, 3: idempotency.Replay, 2: idempotency.Replay, 1: idempotency.Started, 0: idempotency.Started} {
		if got := begin(t, st, fmt.Sprint("k", i), idempotency.Hash{}).Outcome; got != want {
			t.Fatalf("k%d: %v, want %v", i, got, want)
		}
	}
	if got := begin(t, st, "pending", idempotency.Hash{9}).Outcome; got != idempotency.InProgress {
		t.Fatalf("the record in progress was dropped: %v", got)
	}
	complete(t, st, "pending", pending, "late")

	bytes, err := idempotency.NewMemoryStore(idempotency.MemoryConfig{MaxBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	complete(t, bytes, "a", begin(t, bytes, "a", idempotency.Hash{}), "123456")
	complete(t, bytes, "b", begin(t, bytes, "b", idempotency.Hash{}), "123456")
	if got := begin(t, bytes, "a", idempotency.Hash{}).Outcome; got != idempotency.Started {
		t.Fatalf("over MaxBytes the oldest stayed: %v", got)
	}
	if got := begin(t, bytes, "b", idempotency.Hash{}).Outcome; got != idempotency.Replay {
		t.Fatalf("the newest went: %v", got)
	}
}

func TestMemoryStoreRefusesAStaleAttempt(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	st, err := idempotency.NewMemoryStore(idempotency.MemoryConfig{Retention: time.Minute, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	first := begin(t, st, "k", idempotency.Hash{})
	complete(t, st, "k", first, "one")
	if err := st.Complete(context.Background(), scope, "k", first.Attempt, idempotency.Response{Status: 200}); !errors.Is(err, idempotency.ErrStaleAttempt) {
		t.Fatalf("second Complete of one attempt: %v, want ErrStaleAttempt", err)
	}
	clock.advance(time.Minute)
	second := begin(t, st, "k", idempotency.Hash{})
	if err := st.Complete(context.Background(), scope, "k", first.Attempt, idempotency.Response{Status: 200}); !errors.Is(err, idempotency.ErrStaleAttempt) {
		t.Fatalf("Complete of an expired attempt over a new one: %v, want ErrStaleAttempt", err)
	}
	complete(t, st, "k", second, "two")
	if got := begin(t, st, "k", idempotency.Hash{}); string(got.Response.Body) != "two" {
		t.Fatalf("kept %q, want the current attempt's", got.Response.Body)
	}
	for _, cfg := range []idempotency.MemoryConfig{{Retention: -1}, {MaxRecords: -1}, {MaxBytes: -1}} {
		if _, err := idempotency.NewMemoryStore(cfg); !errors.Is(err, idempotency.ErrInvalidConfig) {
			t.Errorf("NewMemoryStore(%+v): %v", cfg, err)
		}
	}
}

func TestMemoryStoreStartsOneAttemptPerKeyUnderConcurrency(t *testing.T) {
	st, err := idempotency.NewMemoryStore(idempotency.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	started := 0
	for range 32 {
		wg.Go(func() {
			c, err := st.Begin(context.Background(), scope, "k", idempotency.Hash{})
			if err != nil {
				t.Error(err)
				return
			}
			if c.Outcome == idempotency.Started {
				mu.Lock()
				started++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if started != 1 {
		t.Fatalf("%d attempts started for one key", started)
	}
}
