package runtime

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
)

// deferringKind is a durable kind whose nAdd adds one and defers its
// reply, handing the Deferred to deferred; nNote does nothing.
func deferringKind(t *testing.T, st host.Store, deferred chan<- Deferred[int]) *kind[int, noteMsg, tctx[int, noteMsg]] {
	t.Helper()
	h := host.New(host.Settings{})
	h.Store = st
	t.Cleanup(func() { h.Close(context.Background()) })
	def := Define("d", func(c *tctx[int, noteMsg], m noteMsg) error {
		if _, ok := m.(nAdd); ok {
			c.Update(func(n int) int { return n + 1 })
			deferred <- Defer[int, noteMsg, tctx[int, noteMsg], int](c.Context)
		}
		return nil
	})
	def.spec.Durable = true
	def.spec.Codec = codec.New[noteMsg]()
	if probs := def.spec.Codec.Register("d", []any{nAdd{}, nNote{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	k := def.Instantiate(h).(*kind[int, noteMsg, tctx[int, noteMsg]])
	h.Register(k)
	return k
}

// askPay1 asks key "a" of k to add, with idempotency key pay-1, and
// returns where its error arrives.
func askPay1(k *kind[int, noteMsg, tctx[int, noteMsg]]) <-chan error {
	out := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), "pay-1"), 10*time.Second)
		defer cancel()
		_, err := Ask[noteMsg, int](ctx, k.ref("a"), nAdd{})
		out <- err
	}()
	return out
}

// awaitNotHandling waits until the cell of key handles no message (its
// last one settled).
func awaitNotHandling(t *testing.T, k *kind[int, noteMsg, tctx[int, noteMsg]], key string) {
	t.Helper()
	c := k.cellAt(k.hash(key), key, false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		busy := c.x == nil || c.x.handling
		c.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cell still handles a message")
		}
		runtime.Gosched()
	}
}

// keptIn decodes the record of d/key in st and returns its kept answers.
func keptIn(t *testing.T, st host.Store, key string) []retained {
	t.Helper()
	v, _, err := st.Read(context.Background(), "d", key)
	if err != nil {
		t.Fatal(err)
	}
	_, _, kept, err := decodeRecord[int](nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return kept
}

// A keyed ask's deferred reply given while its cell handles no message
// (here from the test's goroutine) leaves only once a step of the cell
// wrote its kept answer: were it to leave first, a crash before that
// write would leave a retry with ErrOutcomeUnknown although the caller
// saw the answer.
func TestAKeyedDeferredReplyGivenBetweenMessagesLeavesOnlyWithItsKeptAnswerStored(t *testing.T) {
	st := &heldStore{memStore: newMemStore(), held: make(chan struct{}, 4), release: make(chan struct{})}
	deferred := make(chan Deferred[int], 1)
	k := deferringKind(t, st, deferred)
	out := askPay1(k)
	d := recv(t, deferred, "the deferred reply")
	awaitNotHandling(t, k, "a")
	if kept := keptIn(t, st, "a"); len(kept) != 1 || kept[0].kind != retainedDeferred {
		t.Fatalf("before the reply the record keeps %+v, want pay-1's reply deferred", kept)
	}
	if !d.Resolve(7) {
		t.Fatal("Resolve reports that the asker no longer waits")
	}
	recv(t, st.held, "the write of the kept answer")
	select {
	case err := <-out:
		t.Fatalf("the deferred reply left (%v) while the write that keeps it waited", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(st.release)
	if err := recv(t, out, "the reply"); err != nil {
		t.Fatal(err)
	}
	if kept := keptIn(t, st, "a"); len(kept) != 1 || kept[0].key != "pay-1" || kept[0].kind != retainedReply {
		t.Fatalf("the stored record keeps %+v, want the reply to pay-1", kept)
	}
	// A retry gets it without the handler running (it would defer again).
	ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), "pay-1"), 10*time.Second)
	defer cancel()
	if got, err := Ask[noteMsg, int](ctx, k.ref("a"), nAdd{}); err != nil || got != 7 {
		t.Fatalf("the retry got %d, %v; want 7, the kept reply", got, err)
	}
	select {
	case <-deferred:
		t.Fatal("the retry ran the handler again")
	default:
	}
}

// A deferred reply given after its cell left (passivated, say) has no
// activation to keep its answer: it leaves at once, and the record still
// says the reply was deferred, which a retry reads as ErrOutcomeUnknown.
func TestAKeyedDeferredReplyGivenAfterItsCellLeftLeavesUnkept(t *testing.T) {
	st := newMemStore()
	deferred := make(chan Deferred[int], 1)
	k := deferringKind(t, st, deferred)
	out := askPay1(k)
	d := recv(t, deferred, "the deferred reply")
	awaitNotHandling(t, k, "a")
	c := k.cellAt(k.hash("a"), "a", false)
	c.mu.Lock()
	c.gone = true // as passivation leaves it
	c.mu.Unlock()
	if !d.Resolve(7) {
		t.Fatal("Resolve reports that the asker no longer waits")
	}
	if err := recv(t, out, "the reply"); err != nil {
		t.Fatal(err)
	}
	if kept := keptIn(t, st, "a"); len(kept) != 1 || kept[0].kind != retainedDeferred {
		t.Fatalf("the stored record keeps %+v, want pay-1's reply still deferred", kept)
	}
}

// A retry while the first request's deferred reply is open fails with
// ErrInProgress, and does not run the handler.
func TestARetryWhileTheDeferredReplyIsOpenIsInProgress(t *testing.T) {
	deferred := make(chan Deferred[int], 1)
	k := deferringKind(t, newMemStore(), deferred)
	go func() {
		ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), "pay-1"), 10*time.Second)
		defer cancel()
		Ask[noteMsg, int](ctx, k.ref("a"), nAdd{})
	}()
	d := recv(t, deferred, "the deferred reply")
	defer d.Resolve(0)
	ctx, cancel := context.WithTimeout(WithIdempotencyKey(context.Background(), "pay-1"), 10*time.Second)
	defer cancel()
	if _, err := Ask[noteMsg, int](ctx, k.ref("a"), nAdd{}); !errors.Is(err, ErrInProgress) {
		t.Fatalf("a retry while the reply is deferred: %v, want ErrInProgress", err)
	}
	select {
	case <-deferred:
		t.Fatal("the retry ran the handler again")
	default:
	}
}
