package runtime

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/codec"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/replication"
)

// memStore is a host.Store in memory that reports each write.
type memStore struct {
	mu    sync.Mutex
	recs  map[string][]byte
	aside map[string]map[string][]byte // the records beside a key's state, by name
	// losesAside is what WriteAside fails with, if not nil (counted
	// in lostAsides); losesDelete what Delete fails with.
	losesAside, losesDelete error
	lostAsides              int
	// maxValue is MaxValue's answer; 0 means 1 MiB.
	maxValue int
	writes   chan []byte // each record written, if not nil
	refuses  error       // what Acquire fails with, if not nil
	loses    error       // what Write fails with, if not nil
	// superseded is how many Reads from now fail with errSuperseded;
	// acquired counts Acquire's calls.
	superseded, acquired int
}

func newMemStore() *memStore {
	return &memStore{recs: map[string][]byte{}, writes: make(chan []byte, 64)}
}

func (s *memStore) Acquire(context.Context, string, string, int, replication.Level, bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acquired++
	return s.refuses
}

func (s *memStore) Read(_ context.Context, typ, key string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.superseded > 0 {
		s.superseded--
		return nil, false, errSuperseded
	}
	v, ok := s.recs[typ+"/"+key]
	return v, ok, nil
}

func (s *memStore) ReadAll(ctx context.Context, typ, key string) ([]byte, bool, map[string][]byte, error) {
	v, ok, err := s.Read(ctx, typ, key)
	if err != nil {
		return nil, false, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return v, ok, maps.Clone(s.aside[typ+"/"+key]), nil
}

func (s *memStore) WriteAside(_ context.Context, typ, key, name string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.losesAside != nil {
		s.lostAsides++
		return s.losesAside
	}
	if s.aside == nil {
		s.aside = map[string]map[string][]byte{}
	}
	a := s.aside[typ+"/"+key]
	if a == nil {
		a = map[string][]byte{}
		s.aside[typ+"/"+key] = a
	}
	if v == nil {
		delete(a, name)
	} else {
		a[name] = v
	}
	return nil
}

// asideOf returns the records beside the state of typ/key.
func (s *memStore) asideOf(typ, key string) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.aside[typ+"/"+key])
}

func (s *memStore) Write(_ context.Context, typ, key string, v []byte) error {
	s.mu.Lock()
	if s.loses != nil {
		s.mu.Unlock()
		return s.loses
	}
	s.recs[typ+"/"+key] = v
	s.mu.Unlock()
	if s.writes != nil {
		s.writes <- v
	}
	return nil
}

func (s *memStore) Delete(_ context.Context, typ, key string) error {
	s.mu.Lock()
	if s.losesDelete != nil {
		s.mu.Unlock()
		return s.losesDelete
	}
	delete(s.recs, typ+"/"+key)
	s.mu.Unlock()
	return nil
}

func (s *memStore) Resign(string, string) {}
func (s *memStore) Retry(_, _ string, err error, attempt int) (time.Duration, bool) {
	return time.Millisecond, attempt < 3 && errors.Is(err, errSuperseded)
}

// errSuperseded is what memStore's Retry tries again after.
var errSuperseded = errors.New("superseded")

func (s *memStore) MaxValue(string, string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxValue > 0 {
		return s.maxValue
	}
	return 1 << 20
}

type durMsg interface{ durMsg() }

// dArm sets a one-hour timer "t" that sends dTick.
type dArm struct{}

// dSlow signals started, then waits for release before it changes the
// state.
type dSlow struct{}

type dTick struct{}

func (dArm) durMsg()  {}
func (dSlow) durMsg() {}
func (dTick) durMsg() {}

// durableKind starts a durable kind on a host whose store is st; its
// dSlow handler signals started and waits for release.
func durableKind(t *testing.T, st host.Store, started chan<- struct{}, release <-chan struct{}) (*host.Host, *kind[int, durMsg, tctx[int, durMsg]]) {
	t.Helper()
	h := host.New(host.Settings{})
	h.Store = st
	def := Define("d", func(c *tctx[int, durMsg], m durMsg) error {
		switch m.(type) {
		case dArm:
			c.After("t", time.Hour, dTick{})
		case dSlow:
			started <- struct{}{}
			<-release
			c.Update(func(n int) int { return n + 1 })
		}
		return nil
	})
	def.spec.Durable = true
	def.spec.Codec = codec.New[durMsg]()
	if probs := def.spec.Codec.Register("d", []any{dArm{}, dSlow{}, dTick{}}); len(probs) > 0 {
		t.Fatal(probs)
	}
	k := def.Instantiate(h).(*kind[int, durMsg, tctx[int, durMsg]])
	h.Register(k)
	return h, k
}

// recv waits for a value of ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// timersIn decodes rec and returns its timers' names.
func timersIn(t *testing.T, rec []byte) []string {
	t.Helper()
	_, timers, _, err := decodeRecord[int](nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range timers {
		names = append(names, tm.name)
	}
	return names
}

// armThenSlow arms the key's timer, waits for its record, and starts a
// slow message that waits for release.
func armThenSlow(t *testing.T, k *kind[int, durMsg, tctx[int, durMsg]], st *memStore, started <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	if err := k.ref("a").Tell(ctx, dArm{}); err != nil {
		t.Fatal(err)
	}
	if names := timersIn(t, recv(t, st.writes, "the armed timer's record")); len(names) != 1 {
		t.Fatalf("the record after arming holds timers %v, want [t]", names)
	}
	if err := k.ref("a").Tell(ctx, dSlow{}); err != nil {
		t.Fatal(err)
	}
	recv(t, started, "the slow message")
}

func TestAMessageCommittedAfterStopKeepsTheStoredTimers(t *testing.T) {
	st := newMemStore()
	started, release := make(chan struct{}, 1), make(chan struct{})
	h, k := durableKind(t, st, started, release)
	armThenSlow(t, k, st, started)
	k.Stop()
	close(release)
	if names := timersIn(t, recv(t, st.writes, "the slow message's record")); len(names) != 1 {
		t.Fatalf("the record written after Stop holds timers %v, want [t]", names)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestAMessageCommittedAfterItsKeyMovedKeepsTheStoredTimers(t *testing.T) {
	st := newMemStore()
	started, release := make(chan struct{}, 1), make(chan struct{})
	h, k := durableKind(t, st, started, release)
	defer h.Close(context.Background())
	armThenSlow(t, k, st, started)
	k.Moved(func(string) bool { return false })
	close(release)
	if names := timersIn(t, recv(t, st.writes, "the slow message's record")); len(names) != 1 {
		t.Fatalf("the record written after the key moved holds timers %v, want [t]", names)
	}
}

// errStateTest is the test's StateFailed error.
type errStateTest struct{ err error }

func (e *errStateTest) Error() string { return "state: " + e.err.Error() }
func (e *errStateTest) Unwrap() error { return e.err }

func TestAStoredTimerWhoseMessageNoLongerDecodesFailsTheActivation(t *testing.T) {
	st := newMemStore()
	rec := []byte{recordVersion}
	rec = appendString(rec, "\x00") // msgpack 0
	rec = append(rec, 1)            // one timer
	rec = appendString(rec, "t")
	rec = appendVarint(rec, time.Now().Add(time.Hour).UnixNano())
	rec = appendVarint(rec, 0)
	rec = appendString(rec, "runtime.gone") // a message type no longer listed
	rec = appendString(rec, "\x80")
	st.recs["d/a"] = rec
	h, k := durableKind(t, st, nil, nil)
	defer h.Close(context.Background())
	k.def.StateFailed = func(key string, err error) error { return &errStateTest{err} }
	_, err := Ask[durMsg, int](context.Background(), k.ref("a"), dTick{})
	var se *errStateTest
	if !errors.As(err, &se) {
		t.Fatalf("an activation whose stored timer does not decode: %v, want StateFailed's error", err)
	}
	select {
	case <-st.writes:
		t.Fatal("the record was written over")
	default:
	}
}

var errUnreachable = errors.New("test: store unreachable")

func TestAnActivationWhoseStoreIsUnreachableFailsItsMessageWithoutACrash(t *testing.T) {
	st := newMemStore()
	st.refuses = errUnreachable
	h, k := durableKind(t, st, nil, nil)
	defer h.Close(context.Background())
	k.def.BackoffMin, k.bmin = time.Hour, time.Hour // a crash would hold the second ask an hour
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := Ask[durMsg, int](ctx, k.ref("a"), dTick{})
		cancel()
		if !errors.Is(err, errUnreachable) {
			t.Fatalf("ask %d to a key whose store is unreachable: %v, want the acquire's error", i+1, err)
		}
	}
	if n := h.Restarts.Load(); n != 0 {
		t.Fatalf("an unreachable store counted %d restarts, want none", n)
	}
	st.mu.Lock()
	st.refuses = nil
	st.mu.Unlock()
	if _, err := Ask[durMsg, int](context.Background(), k.ref("a"), dTick{}); !errors.Is(err, ErrNoReply) {
		t.Fatalf("an ask once the store is back: %v, want the handler's ErrNoReply", err)
	}
}

func TestAnActivationSupersededBeforeItRanAcquiresAgain(t *testing.T) {
	for _, tc := range []struct {
		superseded, acquired int
		want                 error
	}{
		{superseded: 2, acquired: 3, want: ErrNoReply},    // the handler ran, once
		{superseded: 5, acquired: 3, want: errSuperseded}, // memStore.Retry gives up at its third
	} {
		st := newMemStore()
		st.superseded = tc.superseded
		started, release := make(chan struct{}, 4), make(chan struct{})
		close(release)
		h, k := durableKind(t, st, started, release)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := Ask[durMsg, int](ctx, k.ref("a"), dSlow{})
		cancel()
		h.Close(context.Background())
		if !errors.Is(err, tc.want) {
			t.Fatalf("an ask whose read was superseded %d times: %v, want %v", tc.superseded, err, tc.want)
		}
		if ran := len(started); (tc.want == ErrNoReply) != (ran == 1) || ran > 1 {
			t.Fatalf("an ask whose read was superseded %d times ran its handler %d times", tc.superseded, ran)
		}
		st.mu.Lock()
		acquired := st.acquired
		st.mu.Unlock()
		if acquired != tc.acquired {
			t.Fatalf("an ask whose read was superseded %d times acquired the key %d times, want %d", tc.superseded, acquired, tc.acquired)
		}
	}
}

func TestAStateNotStoredIsLoggedWithTheAsksRequestID(t *testing.T) {
	st := newMemStore()
	st.loses = errUnreachable
	started, release := make(chan struct{}, 1), make(chan struct{})
	close(release)
	h, k := durableKind(t, st, started, release)
	defer h.Close(context.Background())
	logs := &logRecords{messages: make(chan string, 16)}
	h.Logger = slog.New(logs)
	ctx, cancel := context.WithTimeout(WithRequestID(context.Background(), "unstored"), 5*time.Second)
	defer cancel()
	_, err := Ask[durMsg, int](ctx, k.ref("a"), dSlow{})
	var re *RequestError
	if !errors.Is(err, errUnreachable) || !errors.As(err, &re) || re.RequestID != "unstored" {
		t.Fatalf("got %v, want the write's error naming the request unstored", err)
	}
	// The asker may have its answer before the line is logged.
	for recv(t, logs.messages, "the lost state logged") != "troupe: actor state not stored; the activation ends" {
	}
	if id := logs.attr("troupe: actor state not stored; the activation ends", "request_id"); id != "unstored" {
		t.Fatalf("the log of the lost state has request_id %q, want unstored", id)
	}
}

// logRecords is a slog.Handler that keeps what it is given.
type logRecords struct {
	mu       sync.Mutex
	list     []slog.Record
	messages chan string // each record's message, as it is kept
}

func (r *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecords) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.list = append(r.list, rec.Clone())
	r.mu.Unlock()
	select {
	case r.messages <- rec.Message:
	default:
	}
	return nil
}
func (r *logRecords) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecords) WithGroup(string) slog.Handler      { return r }

// attr returns the attribute key of the first record of message msg.
func (r *logRecords) attr(msg, key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.list {
		if rec.Message != msg {
			continue
		}
		var v string
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v = a.Value.String()
				return false
			}
			return true
		})
		return v
	}
	return ""
}
