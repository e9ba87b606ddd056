package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/replication"
)

// asyncMemStore is a memStore that also writes without blocking: each
// WriteAsync waits in writes until the test calls its done.
type asyncMemStore struct {
	*memStore
	pending  chan pendingWrite
	mu       sync.Mutex
	acquires int
	resigns  int
}

// pendingWrite is a WriteAsync the test has not answered yet.
type pendingWrite struct {
	value []byte
	done  func(error)
}

func newAsyncMemStore() *asyncMemStore {
	return &asyncMemStore{memStore: newMemStore(), pending: make(chan pendingWrite, 64)}
}

func (s *asyncMemStore) Acquire(ctx context.Context, typ, key string, n int, level replication.Level, pinned bool) error {
	s.mu.Lock()
	s.acquires++
	s.mu.Unlock()
	return s.memStore.Acquire(ctx, typ, key, n, level, pinned)
}

func (s *asyncMemStore) Resign(string, string) {
	s.mu.Lock()
	s.resigns++
	s.mu.Unlock()
}

func (s *asyncMemStore) counts() (acquires, resigns int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquires, s.resigns
}

func (s *asyncMemStore) WriteAsync(typ, key string, v []byte, done func(error)) error {
	s.pending <- pendingWrite{value: v, done: func(err error) {
		if err == nil {
			s.memStore.mu.Lock()
			s.recs[typ+"/"+key] = v
			s.memStore.mu.Unlock()
		}
		done(err)
	}}
	return nil
}

type incMsg interface{ incMsg() }

// aInc adds one to the count and answers it.
type aInc struct{}

func (aInc) incMsg() {}

// asyncKind starts a durable counter on a host whose store is st.
func asyncKind(t *testing.T, st host.Store) (*host.Host, *kind[int, incMsg, tctx[int, incMsg]]) {
	t.Helper()
	h := host.New(host.Settings{})
	h.Store = st
	def := Define("c", func(c *tctx[int, incMsg], m incMsg) error {
		c.Update(func(n int) int { return n + 1 })
		Respond(c.Context, c.State())
		return nil
	})
	def.spec.Durable = true
	def.spec.Codec = codec.New[incMsg]()
	if probs := def.spec.Codec.Register("c", []any{aInc{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	k := def.Instantiate(h).(*kind[int, incMsg, tctx[int, incMsg]])
	h.Register(k)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h, k
}

type askOutcome struct {
	n   int
	err error
}

// askInc asks key of k aInc within d, answering on the returned channel.
func askInc(k *kind[int, incMsg, tctx[int, incMsg]], key string, d time.Duration) <-chan askOutcome {
	out := make(chan askOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		n, err := Ask[incMsg, int](ctx, k.ref(key), aInc{})
		out <- askOutcome{n, err}
	}()
	return out
}

func TestAReplyWaitsForItsWriteWhileTheNextMessageIsHandled(t *testing.T) {
	st := newAsyncMemStore()
	_, k := asyncKind(t, st)
	first := askInc(k, "a", 10*time.Second)
	w1 := recv(t, st.pending, "the first message's write")
	second := askInc(k, "a", 10*time.Second)
	// The second message's write is made while the first is in flight:
	// the activation did not wait for it.
	w2 := recv(t, st.pending, "the second message's write")
	select {
	case got := <-first:
		t.Fatalf("the first reply left before its write met the level: %+v", got)
	default:
	}
	w1.done(nil)
	if got := recv(t, first, "the first reply"); got.err != nil || got.n != 1 {
		t.Fatalf("first reply %+v, want 1", got)
	}
	select {
	case got := <-second:
		t.Fatalf("the second reply left before its write met the level: %+v", got)
	default:
	}
	w2.done(nil)
	if got := recv(t, second, "the second reply"); got.err != nil || got.n != 2 {
		t.Fatalf("second reply %+v, want 2", got)
	}
}

var errWriteRefused = errors.New("test: write refused")

func TestAFailedWriteFailsItsReplyAndEndsTheActivation(t *testing.T) {
	st := newAsyncMemStore()
	_, k := asyncKind(t, st)
	first := askInc(k, "a", 10*time.Second)
	recv(t, st.pending, "the first write").done(nil)
	recv(t, first, "the first reply")
	failing := askInc(k, "a", 10*time.Second)
	recv(t, st.pending, "the second write").done(errWriteRefused)
	if got := recv(t, failing, "the failed write's reply"); !errors.Is(got.err, errWriteRefused) {
		t.Fatalf("the reply of a failed write: %+v, want the write's error", got)
	}
	// The next message ends the lost activation; the one after starts a
	// new one, which reads what the store holds (1, not 2).
	if got := recv(t, askInc(k, "a", 10*time.Second), "the lost activation's reply"); got.err == nil {
		t.Fatalf("the lost activation answered %d", got.n)
	}
	next := askInc(k, "a", 10*time.Second)
	w := recv(t, st.pending, "the write of a new activation")
	w.done(nil)
	if got := recv(t, next, "the new activation's reply"); got.err != nil || got.n != 2 {
		t.Fatalf("reply of the new activation %+v, want 2 (the stored 1, plus one)", got)
	}
	if acquires, resigns := st.counts(); acquires != 2 || resigns < 1 {
		t.Fatalf("the key was acquired %d times and resigned %d times, want 2 and at least 1", acquires, resigns)
	}
}

func TestAWriteThatMissesTheDeadlineFailsItsReplyWithErrUnavailable(t *testing.T) {
	st := newAsyncMemStore()
	_, k := asyncKind(t, st)
	out := askInc(k, "a", 300*time.Millisecond)
	w := recv(t, st.pending, "the write")
	got := recv(t, out, "the reply")
	if !errors.Is(got.err, ErrUnavailable) {
		t.Fatalf("the reply of a write never acknowledged: %+v, want ErrUnavailable", got)
	}
	if _, resigns := st.counts(); resigns != 1 {
		t.Fatalf("the key was resigned %d times at the deadline, want once", resigns)
	}
	w.done(nil) // late: changes nothing
}

// Each write in flight fails at its own deadline, though one timer
// serves them all: a later write with a nearer deadline fails first,
// while the earlier write, whose deadline is far, still waits.
func TestWritesInFlightFailEachAtItsOwnDeadline(t *testing.T) {
	st := newAsyncMemStore()
	_, k := asyncKind(t, st)
	far := askInc(k, "a", 10*time.Second)
	w1 := recv(t, st.pending, "the first write")
	near := askInc(k, "a", 300*time.Millisecond)
	w2 := recv(t, st.pending, "the second write")
	start := time.Now()
	got := recv(t, near, "the second reply")
	if !errors.Is(got.err, ErrUnavailable) {
		t.Fatalf("the reply of the write with the nearer deadline: %+v, want ErrUnavailable", got)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the nearer deadline was kept %v after it", waited)
	}
	select {
	case got := <-far:
		t.Fatalf("the first reply, whose deadline is 10s away, left with the second's: %+v", got)
	default:
	}
	w1.done(nil)
	w2.done(nil) // late: changes nothing
	if got := recv(t, far, "the first reply"); got.err != nil || got.n != 1 {
		t.Fatalf("the first reply %+v, want 1 once its write met the level", got)
	}
}

func TestAnActivationWithAWriteInFlightIsNotPassivated(t *testing.T) {
	st := newAsyncMemStore()
	_, k := asyncKind(t, st)
	out := askInc(k, "a", 10*time.Second)
	w := recv(t, st.pending, "the write")
	cl := k.cellAt(k.hash("a"), "a", false)
	idle := func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return cl.started && !cl.running
	}
	for deadline := time.Now().Add(10 * time.Second); !idle(); {
		if time.Now().After(deadline) {
			t.Fatal("the activation never went idle")
		}
		time.Sleep(time.Millisecond) // polls for the goroutine's exit, which has no event
	}
	day := 0
	sweep := func() bool {
		day++ // sweeps are at least a quarter of the idle timeout apart
		k.Sweep(time.Now().Add(time.Duration(day) * 24 * time.Hour))
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return cl.gone
	}
	// The first sweep stamps the idle activation, the next would end it.
	if sweep() || sweep() {
		t.Fatal("an activation whose write is in flight was passivated")
	}
	w.done(nil)
	if got := recv(t, out, "the reply"); got.err != nil || got.n != 1 {
		t.Fatalf("reply %+v, want 1", got)
	}
	// The first sweep stamps the idle activation, the next one ends it.
	if !sweep() && !sweep() {
		t.Fatal("an idle activation whose write was answered was not passivated")
	}
	if _, resigns := st.counts(); resigns != 1 {
		t.Fatalf("the key was resigned %d times, want once, after its write", resigns)
	}
}
