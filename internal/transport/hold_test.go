package transport

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"
	"time"
)

// writeLog records the data frames of each write a transport makes.
type writeLog struct {
	mu     sync.Mutex
	writes []int // data frames per write that carried any
}

func (w *writeLog) tune(tn *tuning) {
	tn.wrote = func(data int) {
		if data == 0 {
			return
		}
		w.mu.Lock()
		w.writes = append(w.writes, data)
		w.mu.Unlock()
	}
}

// since returns the writes recorded after the first n.
func (w *writeLog) since(n int) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.writes[n:]...)
}

func (w *writeLog) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.writes)
}

// connectedPair returns a sender a, whose writes log records, connected to
// b: one envelope crossed already. Neither grants credit for an hour, so
// that nothing but the test's sends makes a write (a grant arriving makes
// the reader write what is queued).
func connectedPair(t *testing.T) (a, b *testNode, log *writeLog) {
	t.Helper()
	log = &writeLog{}
	quiet := func(tn *tuning) { tn.grantDelay = time.Hour }
	a = newTunedNode(t, func(tn *tuning) { quiet(tn); log.tune(tn) }, nil)
	b = newTunedNode(t, quiet, nil)
	if err := a.t.Post(b.t.Self(), StreamApplication, 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "the first envelope", func() bool { return len(b.got[StreamApplication]) == 1 })
	waitIdle(t, a)
	return a, b, log
}

// waitIdle waits until n's only connection has no write under way: the
// writer that wrote the first envelope (after the dial) may still hold the
// turn when it arrives, and would take what is sent meanwhile.
func waitIdle(t *testing.T, n *testNode) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n.t.mu.Lock()
		var ss []*session
		for _, s := range n.t.sessions {
			ss = append(ss, s)
		}
		n.t.mu.Unlock()
		idle := len(ss) == 1
		for _, s := range ss {
			s.mu.Lock()
			idle = idle && s.conn != nil && !s.conn.writing && s.conn.tail == nil
			s.mu.Unlock()
		}
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection never went idle")
		}
		runtime.Gosched()
	}
}

// keySeq is an envelope that names its key and its place among the key's.
func keySeq(key uint64, seq int) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, key), uint64(seq))
}

// Envelopes posted under a hold (the replies of many asks to one peer)
// leave together once it is released, and arrive in order per key.
func TestHeldPostsLeaveTogetherAtRelease(t *testing.T) {
	a, b, log := connectedPair(t)
	const keys, per = 4, 25
	start := log.len()
	release := a.t.Hold()
	for i := range per {
		for k := range uint64(keys) {
			if err := a.t.Post(b.t.Self(), StreamApplication, k, keySeq(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	release()
	b.waitFor(t, "every held envelope", func() bool { return len(b.got[StreamApplication]) == 1+keys*per })
	// One write, or two when the writer, woken before the hold by the
	// first envelope's traffic, took what was queued so far: not one each.
	if w := log.since(start); len(w) > 2 {
		t.Fatalf("the held envelopes left in %d writes (%v data frames each), want one (two at most)", len(w), w)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	next := map[uint64]int{}
	for _, p := range b.got[StreamApplication][1:] {
		k, seq := binary.BigEndian.Uint64(p), int(binary.BigEndian.Uint64(p[8:]))
		if seq != next[k] {
			t.Fatalf("key %d: envelope %d arrived where %d was due", k, seq, next[k])
		}
		next[k]++
	}
}

// Once every hold ended a lone envelope goes at once, in a write of its
// own: nothing waits for more to come.
func TestALonePostAfterTheHoldsGoesAtOnce(t *testing.T) {
	a, b, log := connectedPair(t)
	a.t.Hold()()
	start := log.len()
	if err := a.t.Post(b.t.Self(), StreamApplication, 1, []byte("alone")); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "the lone envelope", func() bool { return len(b.got[StreamApplication]) == 2 })
	if w := log.since(start); len(w) != 1 || w[0] != 1 {
		t.Fatalf("the lone envelope left in writes of %v data frames, want one write of one", w)
	}
}

// Holds may overlap: any release sends what waits, so one holder never
// keeps another's envelopes back for longer than its own hold lasts.
func TestAnyReleaseSendsWhatWaits(t *testing.T) {
	a, b, _ := connectedPair(t)
	first, second := a.t.Hold(), a.t.Hold()
	defer second()
	if err := a.t.Post(b.t.Self(), StreamApplication, 1, []byte("one")); err != nil {
		t.Fatal(err)
	}
	first()
	b.waitFor(t, "the envelope sent under two holds, once the first ended", func() bool { return len(b.got[StreamApplication]) == 2 })
}

// A hold defers every kind of send: Send and SendWait under a hold leave
// at the release with Post's.
func TestHeldSendsLeaveAtRelease(t *testing.T) {
	a, b, log := connectedPair(t)
	start := log.len()
	release := a.t.Hold()
	if _, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, []byte("send")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.t.SendWait(context.Background(), b.t.Self(), StreamApplication, 1, []byte("wait")); err != nil {
		t.Fatal(err)
	}
	if err := a.t.Post(b.t.Self(), StreamApplication, 1, []byte("post")); err != nil {
		t.Fatal(err)
	}
	release()
	b.waitFor(t, "the three envelopes", func() bool { return len(b.got[StreamApplication]) == 4 })
	if w := log.since(start); len(w) > 2 {
		t.Fatalf("the held envelopes left in %d writes (%v data frames each), want one (two at most)", len(w), w)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, want := range []string{"send", "wait", "post"} {
		if got := string(b.got[StreamApplication][i+1]); got != want {
			t.Fatalf("envelope %d is %q, want %q", i+1, got, want)
		}
	}
}
