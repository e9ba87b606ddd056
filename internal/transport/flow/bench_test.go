package flow

import (
	"testing"
	"time"
)

// benchNext writes one frame per iteration, waiting out pacing in virtual
// time and granting everything whenever the scheduler is blocked; refill
// keeps the queue stocked.
func benchNext(b *testing.B, s *Scheduler, refill func()) {
	now := t0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		refill()
		for {
			_, wait, ok := s.Next(now)
			if ok {
				break
			}
			if wait > 0 {
				now = now.Add(wait)
				continue
			}
			for _, st := range s.streams {
				c := st.credit
				_ = s.ApplyGrant(st.cfg.ID, Grant{Consumed: c.Sent(), Window: c.Window()}, now)
			}
		}
		now = now.Add(time.Microsecond)
	}
}

// BenchmarkSchedulerSmallEnvelopes: each iteration enqueues one 100-byte
// envelope on one of 64 keys and writes one frame.
func BenchmarkSchedulerSmallEnvelopes(b *testing.B) {
	s := mustScheduler(b, simConfig())
	payload := make([]byte, 100)
	var key uint64
	benchNext(b, s, func() {
		key++
		if _, err := s.Enqueue(stApp, key%64, payload); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkSchedulerInterleavedLargeEnvelopes: eight 1 MiB envelopes on two
// data streams interleave; each iteration writes one 16 KiB frame.
func BenchmarkSchedulerInterleavedLargeEnvelopes(b *testing.B) {
	s := mustScheduler(b, simConfig())
	var key uint64
	benchNext(b, s, func() {
		for s.Pending() < 8 {
			key++
			if _, err := s.EnqueueSize([]StreamID{stApp, stRepl}[key%2], key, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSchedulerMixed: small and large envelopes on data streams and
// membership, one frame per iteration.
func BenchmarkSchedulerMixed(b *testing.B) {
	s := mustScheduler(b, simConfig())
	var key uint64
	benchNext(b, s, func() {
		key++
		switch key % 8 {
		case 0:
			_, _ = s.EnqueueSize(stMembership, key%16, 300)
		case 1:
			if s.Pending() < 16 {
				_, _ = s.EnqueueSize(stRepl, key, 256<<10)
			}
		default:
			_, _ = s.EnqueueSize(stApp, key%16, 200)
		}
	})
}

// BenchmarkEstimatorSendAndCredit: one frame recorded and one grant
// applied per iteration, with a window of frames in flight.
func BenchmarkEstimatorSendAndCredit(b *testing.B) {
	e := mustEstimator(b, EstimatorConfig{})
	const frame, inflight = 16 << 10, 32
	now := t0
	var off int64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		now = now.Add(10 * time.Microsecond)
		off += frame
		e.OnSend(1, off, frame, now)
		if off > inflight*frame {
			e.OnCredit(1, off-inflight*frame, now)
		}
	}
}

// BenchmarkRecvCredit: one frame arrives, is consumed and maybe granted per
// iteration.
func BenchmarkRecvCredit(b *testing.B) {
	r := mustRecv(b, RecvConfig{})
	now := t0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		now = now.Add(10 * time.Microsecond)
		held, err := r.Arrive(16<<10, true, 16<<10, now)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.Consume(held, now)
		r.Grant(now, 20*time.Millisecond)
	}
}
