package transport

import (
	"context"
	"fmt"
	"testing"
)

func TestStatsCountTheFramesOfEachStreamAsBothSidesSeeThem(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	const n, size = 10, 100
	for i := range n {
		r, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, uint64(i), make([]byte, size))
		if err != nil {
			t.Fatal(err)
		}
		if err := waitReceipt(t, r); err != nil {
			t.Fatal(err)
		}
	}
	// The writer counts its frames when it next takes the session's lock,
	// which may come after the receipt resolved.
	var sent, received StreamTraffic
	eventuallyf(t, func() bool {
		sent, received = a.t.Stats().Sent[StreamApplication], b.t.Stats().Received[StreamApplication]
		return sent == received && sent.Frames >= n
	}, func() string {
		return fmt.Sprintf("application frames sent by a %+v, received by b %+v: want equal, at least %d frames", sent, received, n)
	})
	// The data frames, and perhaps a grant of a's own on the stream.
	if lo, hi := uint64(n*(size+HeaderSize)), uint64(n*(size+HeaderSize+16)); sent.Frames > n+2 || sent.Bytes < lo || sent.Bytes > hi {
		t.Errorf("a sent %+v on the application stream, want %d to %d frames of %d to %d bytes in all", sent, n, n+2, lo, hi)
	}
	if got := a.t.Stats().Received[StreamApplication]; got.Frames == 0 {
		t.Error("a received no application frame: b's credit for the stream counts there")
	}
	st := a.t.Stats()
	if st.Connected != 1 || st.MaxRTT <= 0 || st.PacingRate <= 0 {
		t.Errorf("a's Stats with one peer connected and measured: Connected %d, MaxRTT %v, PacingRate %v; want 1 and both positive",
			st.Connected, st.MaxRTT, st.PacingRate)
	}
	if st.Resumes != 0 {
		t.Errorf("Resumes = %d before any connection broke, want 0", st.Resumes)
	}
}

func TestStatsCountAResumeOnANewConnection(t *testing.T) {
	a, b := newTestNode(t, nil), newTestNode(t, nil)
	send := func() {
		r, err := a.t.Send(context.Background(), b.t.Self(), StreamApplication, 1, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if err := waitReceipt(t, r); err != nil {
			t.Fatal(err)
		}
	}
	send()
	s, _ := a.t.sessionFor(b.t.Self(), false)
	s.mu.Lock()
	s.fenceLocked()
	s.mu.Unlock()
	send()
	if ra, rb := a.t.Stats().Resumes, b.t.Stats().Resumes; ra != 1 || rb != 1 {
		t.Errorf("Resumes after one connection was replaced: a %d, b %d; want 1 on each side", ra, rb)
	}
}
