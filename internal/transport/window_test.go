package transport

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/transport/flow"
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
		if _, err := r.Arrive(min(frame, room()), false, now); err != nil {
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
		if _, err := r.Arrive(min(frame, n), true, now); err != nil {
			t.Fatal(err)
		}
	}
	if r.Held() > agreed {
		t.Fatalf("receiver that stopped reading holds %d bytes unread, want at most the agreed %d", r.Held(), agreed)
	}
	if _, err := r.Arrive(1, true, now); err == nil {
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
