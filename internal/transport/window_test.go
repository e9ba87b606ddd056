package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/transport/flow"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// The agreed window bounds what a peer may make a receiver hold unread,
// with auto-tuning active: a peer streams large envelopes (their bytes are
// credited as they arrive, fast against the round trip, so tuning grows
// the window), then the receiver stops reading and every frame completes
// an envelope it holds. Neither its window nor what it holds passes the
// agreed window, and the sender's credit never counts on more.
func TestAutoTuningNeverTakesTheWindowPastTheAgreedOne(t *testing.T) {
	const agreed, frame = 1 << 20, 16 << 10
	s := connlessSession(t, wire.Config{ClusterName: "test", Limits: wire.Limits{MaxFrame: frame, Window: agreed}})
	st := StreamReplication
	r := &s.recv[st]
	start := r.Window()
	now, rtt := time.Unix(0, 0), 100*time.Millisecond
	room := func() int64 { g := r.Granted(); return g.Consumed + g.Window - r.Received() }

	for range 4096 {
		if _, err := r.Arrive(min(frame, room()), false, 0, now); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Microsecond)
		r.Grant(now, rtt)
	}
	if r.Window() <= start {
		t.Fatalf("window %d after a fast stream, want auto-tuning to grow it past %d", r.Window(), start)
	}
	if r.Window() > agreed {
		t.Fatalf("window grew to %d, past the agreed %d", r.Window(), agreed)
	}

	for n := room(); n > 0; n = room() {
		if _, err := r.Arrive(min(frame, n), true, min(frame, n), now); err != nil {
			t.Fatal(err)
		}
	}
	if r.Held() > agreed {
		t.Fatalf("receiver that stopped reading holds %d bytes unread, want at most the agreed %d", r.Held(), agreed)
	}
	if _, err := r.Arrive(1, true, 1, now); err == nil {
		t.Fatalf("a byte past the agreed window was accepted with %d held", r.Held())
	}

	cr := s.sched.Credit(flow.StreamID(st))
	if _, err := cr.Apply(flow.Grant{Window: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	if cr.Window() > agreed {
		t.Fatalf("sender took a grant of 8 MiB as a window of %d, want at most the agreed %d", cr.Window(), agreed)
	}
}

// A receiver whose handler stops reading holds at most two agreed windows
// of complete envelopes, plus the envelopes the sender had started,
// however many large ones the sender queues: complete envelopes used to
// count against the window by their last frame only, so a reader that
// blocked took in every queued 512 KiB envelope (20 MiB here) at 16 KiB
// of credit each.
func TestAReceiverThatStopsReadingHoldsAtMostTwoWindowsOfLargeEnvelopes(t *testing.T) {
	const window, size, n = 256 << 10, 512 << 10, 40
	for _, keys := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d keys", keys), func(t *testing.T) {
			lim := func(c *wire.Config) { c.Limits.Window = window }
			a, b := newTestNode(t, lim), newTestNode(t, lim)
			blocked, release := make(chan struct{}), make(chan struct{})
			var releaseOnce sync.Once
			unblock := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(unblock)
			var first atomic.Bool
			b.t.Handle(StreamApplication, HandlerFunc(func(ring.NodeID, []byte) {
				if first.CompareAndSwap(false, true) {
					close(blocked)
					<-release
				}
			}))
			var rs []*Receipt
			for i := range n {
				r, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, uint64(i%keys), make([]byte, size))
				if err != nil {
					t.Fatal(err)
				}
				rs = append(rs, r)
			}
			<-blocked
			// Wait until the sender stopped for want of credit and the
			// receiver read all it sent, or everything crossed.
			sa, _ := a.t.sessionFor(b.t.Self(), false)
			s, _ := b.t.sessionFor(a.t.Self(), false)
			eventuallyf(t, func() bool {
				sa.mu.Lock()
				cr := sa.sched.Credit(flow.StreamID(StreamApplication))
				// Stopped as flow's scheduler stops: a frame is cut short
				// to the credit only while an eighth of the window is left.
				sent, stopped, done := cr.Sent(), cr.Available() < max(16<<10, cr.Window()/8), sa.queuedBytes == 0
				sa.mu.Unlock()
				s.mu.Lock()
				received := s.recv[StreamApplication].Received()
				s.mu.Unlock()
				return done || stopped && received == sent
			}, func() string { return "the sender neither stopped nor finished" })
			s.mu.Lock()
			var unread, partial int64
			for _, d := range s.inbox[StreamApplication] {
				unread += int64(len(d.payload))
			}
			for _, p := range s.partial[StreamApplication] {
				partial += int64(len(p.buf))
			}
			counted := s.recv[StreamApplication].Unread()
			s.mu.Unlock()
			// The envelope being handled counts too (it is not in
			// the inbox): one more size.
			bound := int64(2*window + keys*size + size)
			t.Logf("%d keys: the blocked receiver holds %d bytes of complete envelopes (%d counted unread) and %d of incomplete ones; bound %d",
				keys, unread+size, counted, partial, bound)
			if unread+size+partial > bound {
				t.Errorf("a blocked receiver holds %d bytes unread, want at most two windows (%d) and the envelopes started (%d)",
					unread+size+partial, 2*window, keys*size)
			}
			unblock()
			for i, r := range rs {
				if err := waitReceipt(t, r); err != nil {
					t.Fatalf("receipt %d after the handler resumed: %v", i, err)
				}
			}
		})
	}
}

// A malformed data frame breaks the connection, and the session resumes
// with the stream's credit: the frame must have counted for nothing there.
// Counted, a bogus last chunk of a large envelope would leave its size
// unread for good, and the stream's later large envelopes would wait for
// credit forever.
func TestAMalformedDataFrameCountsNothingAgainstTheWindow(t *testing.T) {
	s := connlessSession(t, wire.Config{ClusterName: "test", Limits: wire.Limits{Window: 256 << 10}})
	st := StreamApplication
	r := &s.recv[st]
	s.mu.Lock()
	defer s.mu.Unlock()
	first := Header{Version: ProtocolVersion, Type: FrameData, Flags: FlagFirst, Stream: st}
	if err := s.applyDataLocked(first, dataFrame{Envelope: 0, Total: 1 << 20}, make([]byte, 16<<10), time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	before := [...]int64{r.Received(), r.Consumed(), r.Unread(), r.Held(), r.Waiting()}
	last := Header{Version: ProtocolVersion, Type: FrameData, Flags: FlagLast, Stream: st}
	for _, bad := range []struct {
		name string
		h    Header
		d    dataFrame
		n    int
	}{
		{"a last chunk that leaves the envelope short", last, dataFrame{Envelope: 0, Offset: 16 << 10}, 1000},
		{"a chunk at the wrong offset", last, dataFrame{Envelope: 0, Offset: 3}, 1000},
		{"a chunk of an unknown envelope", last, dataFrame{Envelope: 7}, 1000},
		{"an envelope started twice", first, dataFrame{Envelope: 0, Total: 1 << 20}, 1000},
	} {
		err := s.applyDataLocked(bad.h, bad.d, make([]byte, bad.n), time.Now(), nil)
		if !errors.Is(err, ErrMalformedFrame) {
			t.Fatalf("%s: %v, want %v", bad.name, err, ErrMalformedFrame)
		}
		if after := [...]int64{r.Received(), r.Consumed(), r.Unread(), r.Held(), r.Waiting()}; after != before {
			t.Fatalf("%s changed the credit (received, consumed, unread, held, waiting) from %v to %v", bad.name, before, after)
		}
	}
}
