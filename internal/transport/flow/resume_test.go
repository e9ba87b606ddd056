package flow

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

type sentEnvelope struct {
	h         Handle
	stream    StreamID
	key       uint64
	cancelled CancelResult
	delivered int
}

type rxPartial struct {
	got int
}

// A seeded workload of small and large envelopes on membership and both data
// streams, with cancellations, crosses a simulated link that is cut several
// times; each cut resumes by the package's recipe (fence, exchange received
// counts, resend from them). Every envelope not dropped by Cancel arrives
// exactly once, per-key order holds, the receiver never sees an overrun or
// a chunk out of place, and the estimator ends with nothing in flight.
func TestResumeAcrossCutsLosesAndDuplicatesNothing(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x7e1e))
			m := newSim(t, simConfig(), RecvConfig{}, 6.25e6, 10*time.Millisecond)
			var sent []*sentEnvelope
			byHandle := map[Handle]*sentEnvelope{}
			partial := map[[2]uint64]*rxPartial{}
			started := map[StreamID]int64{}
			for _, sc := range m.s.cfg.Streams {
				started[sc.ID] = -1
			}
			order := map[[2]uint64][]*sentEnvelope{}
			m.onArrive = func(f Frame, at time.Time) {
				id := [2]uint64{uint64(f.Stream), f.Envelope}
				if f.Kind == FrameAbort {
					delete(partial, id)
					return
				}
				p := partial[id]
				if f.First {
					if int64(f.Envelope) <= started[f.Stream] {
						if f.Len != 0 {
							t.Fatalf("envelope %v started twice", id)
						}
						return // an empty envelope resent at the boundary
					}
					started[f.Stream] = int64(f.Envelope)
					p = &rxPartial{}
					partial[id] = p
				}
				if p == nil {
					t.Fatalf("frame %+v of an envelope that did not start", f)
				}
				if f.Offset != p.got {
					t.Fatalf("frame %+v at offset %d, want %d", f, f.Offset, p.got)
				}
				p.got += f.Len
				if f.Last {
					delete(partial, id)
					e := byHandle[f.Handle]
					e.delivered++
					k := [2]uint64{uint64(e.stream), e.key}
					order[k] = append(order[k], e)
				}
			}
			end := t0.Add(3 * time.Second)
			m.every(time.Millisecond, end, func() {
				switch r := rng.IntN(100); {
				case r < 60:
					st := []StreamID{stMembership, stApp, stApp, stRepl}[rng.IntN(4)]
					size := rng.IntN(2000)
					if rng.IntN(20) == 0 {
						size = rng.IntN(1 << 20)
					}
					e := &sentEnvelope{stream: st, key: rng.Uint64N(4)}
					e.h = m.enqueue(st, e.key, size)
					sent = append(sent, e)
					byHandle[e.h] = e
				case r < 66 && len(sent) > 0:
					e := sent[rng.IntN(len(sent))]
					if e.cancelled == CancelUnknown {
						e.cancelled = m.s.Cancel(e.h)
					}
					m.pump()
				}
			})
			for range 4 {
				cutAt := t0.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
				m.at(cutAt, m.cut)
			}
			m.runUntil(end.Add(30 * time.Second))

			var dropped, aborted, delivered int
			for _, e := range sent {
				switch e.cancelled {
				case CancelDropped:
					dropped++
				case CancelAborted:
					aborted++
				}
				delivered += e.delivered
			}
			t.Logf("%d envelopes: %d delivered, %d dropped and %d aborted by Cancel; %d frames resent over 4 cuts",
				len(sent), delivered, dropped, aborted, m.resent)
			if m.s.Pending() != 0 {
				t.Fatalf("%d envelopes still pending 30 s after the workload", m.s.Pending())
			}
			for _, e := range sent {
				want := 1
				if e.cancelled != CancelUnknown {
					want = 0
				}
				if e.delivered != want {
					t.Errorf("envelope on stream %d key %d (cancel %v) delivered %d times, want %d", e.stream, e.key, e.cancelled, e.delivered, want)
				}
			}
			for k, got := range order {
				var want []*sentEnvelope
				for _, e := range sent {
					if [2]uint64{uint64(e.stream), e.key} == k && e.delivered > 0 {
						want = append(want, e)
					}
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("stream %d key %d: delivery %d out of enqueue order", k[0], k[1], i)
					}
				}
			}
			if in := m.s.Estimator().Inflight(); in != 0 {
				t.Errorf("estimator has %d bytes in flight after everything was credited, want 0", in)
			}
			if len(partial) != 0 {
				t.Errorf("receiver holds %d partial envelopes, want none (aborts must reach it)", len(partial))
			}
		})
	}
}
