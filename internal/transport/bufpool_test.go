package transport

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
)

func TestClassSizeHoldsTheSizeAndWastesLessThanAFifth(t *testing.T) {
	for n := 1; n <= 64<<20; n += 1 + n/7 {
		c := classSize(n)
		if c < n || (c-n)*5 > c {
			t.Fatalf("classSize(%d) = %d: want at least n and less than a fifth more", n, c)
		}
		if classSize(c) != c {
			t.Fatalf("classSize(%d) = %d, a class size maps to %d", n, c, classSize(c))
		}
	}
}

func TestBufPoolKeepsOnlyItsClassesWithinItsBudget(t *testing.T) {
	p := newBufPool(1<<20, 2<<20)
	p.put(make([]byte, 100))            // below poolMin
	p.put(make([]byte, 0, 40000))       // not a class size
	p.put(make([]byte, 0, 2<<20))       // above the largest class
	p.put(make([]byte, 10, 64<<10)[5:]) // a sub-slice: capacity no class
	if p.held != 0 {
		t.Fatalf("pool holds %d bytes of buffers that are not its classes", p.held)
	}
	for range 3 {
		p.put(make([]byte, 0, 1<<20))
	}
	if p.held != 2<<20 {
		t.Fatalf("pool holds %d bytes, want its budget %d", p.held, 2<<20)
	}
	if b := p.get(1 << 20); len(b) != 0 || cap(b) != 1<<20 {
		t.Fatalf("get(1 MiB) = len %d cap %d, want an empty 1 MiB buffer", len(b), cap(b))
	}
}

// The pool is invisible to handlers that keep their payloads: each gets a
// buffer of its own.
func TestPayloadsNotReleasedStayIntact(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	var sent [][]byte
	var last *Receipt
	for i := range 8 {
		p := bytes.Repeat([]byte{byte('a' + i)}, 64<<10+i)
		sent = append(sent, p)
		r, err := a.t.Send(context.Background(), b.t.Self(), StreamReplication, 1, p)
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	if err := waitReceipt(t, last); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "8 envelopes", func() bool { return len(b.got[StreamReplication]) == 8 })
	for i, p := range b.got[StreamReplication] {
		if !bytes.Equal(p, sent[i]) {
			t.Fatalf("envelope %d changed after delivery", i)
		}
	}
}

// A buffer a handler releases holds the next envelope of its size class,
// with that envelope's bytes, on the deliverer's path (replication) and on
// the reader's inline path (application).
func TestAReleasedBufferHoldsTheNextEnvelope(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	got := make(chan []byte, 1)
	for _, st := range []StreamID{StreamApplication, StreamReplication} {
		b.t.Handle(st, HandlerFunc(func(_ ring.NodeID, p []byte) { got <- p }))
	}
	for _, st := range []StreamID{StreamApplication, StreamReplication} {
		var prev []byte
		for i := range 3 {
			want := bytes.Repeat([]byte{byte(i + 1)}, 100<<10-i)
			r, err := a.t.Send(context.Background(), b.t.Self(), st, 1, want)
			if err != nil {
				t.Fatal(err)
			}
			if err := waitReceipt(t, r); err != nil {
				t.Fatal(err)
			}
			p := <-got
			if !bytes.Equal(p, want) {
				t.Fatalf("stream %d, envelope %d: payload differs from what was sent", st, i)
			}
			if prev != nil && &p[0] != &prev[0] {
				t.Fatalf("stream %d, envelope %d: not read into the buffer released before it", st, i)
			}
			b.t.Release(p)
			prev = p
		}
	}
}

// A posted payload is the transport's: its buffer comes back from Buffer
// once the peer consumed the envelope, and not while the peer's handler
// still holds it.
func TestAPostedBufferIsReusedOnceConsumed(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	const n = 100 << 10
	entered, leave := make(chan []byte, 1), make(chan struct{})
	b.t.Handle(StreamApplication, HandlerFunc(func(_ ring.NodeID, p []byte) {
		entered <- bytes.Clone(p)
		<-leave
	}))
	p := a.t.Buffer(n)
	p = append(p, bytes.Repeat([]byte{7}, n)...)
	first := &p[0]
	if err := a.t.Post(b.t.Self(), StreamApplication, 1, p); err != nil {
		t.Fatal(err)
	}
	if got := <-entered; !bytes.Equal(got, bytes.Repeat([]byte{7}, n)) {
		t.Fatal("the peer got other bytes than were posted")
	}
	// Not consumed yet: the buffer is not handed out.
	for range 3 {
		if q := a.t.Buffer(n); &q[:1][0] == first {
			t.Fatal("Buffer handed out a posted buffer the peer had not consumed")
		}
	}
	close(leave)
	deadline := time.Now().Add(10 * time.Second)
	for {
		q := a.t.Buffer(n)
		if &q[:1][0] == first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the posted buffer never came back from Buffer after the peer consumed it")
		}
		time.Sleep(time.Millisecond)
	}
}
