package flow

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Random links, frame sizes, windows, grant thresholds and slack,
// congestion-window floors, consumer speeds, workloads, cancellations and connection cuts: the
// transfer never stalls and never overruns, and every envelope not dropped
// by Cancel arrives exactly once, in key order.
func TestSimulatedTransferNeverStalls(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := float64(rapid.Int64Range(100e3, 100e6).Draw(t, "rate"))
		rtt := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(100*time.Millisecond)).Draw(t, "rtt"))
		window := rapid.Int64Range(1<<10, 1<<20).Draw(t, "window")
		cfg := simConfig()
		cfg.MaxFrame = rapid.IntRange(512, 64<<10).Draw(t, "maxFrame")
		cfg.Estimator.MinCwnd = rapid.Int64Range(1<<10, 256<<10).Draw(t, "minCwnd")
		maxWindow := window * rapid.Int64Range(1, 8).Draw(t, "growth")
		for i := range cfg.Streams {
			cfg.Streams[i].Window, cfg.Streams[i].MaxWindow = window, maxWindow
		}
		// Slack within its rule: at most Window/8, and summed over the
		// four streams below the congestion window floor (with Slack up
		// to Window/8 alone, this finds a stall within a few hundred
		// cases).
		recv := RecvConfig{Window: window, MaxWindow: maxWindow,
			GrantBytes: rapid.Int64Range(0, window).Draw(t, "grantBytes"),
			Slack:      rapid.Int64Range(0, min(window/8, (cfg.Estimator.MinCwnd-1)/4)).Draw(t, "slack")}
		m := newSim(t, cfg, recv, rate, rtt)
		if rapid.Bool().Draw(t, "slowConsumer") {
			m.consumeRate = rate * rapid.Float64Range(0.05, 1).Draw(t, "consumeShare")
		}

		type env struct {
			h         Handle
			stream    StreamID
			key       uint64
			cancelled CancelResult
			delivered int
		}
		var envs, enqueued []*env
		byHandle := map[Handle]*env{}
		order := map[[2]uint64][]*env{}
		started := map[StreamID]int64{stControl: -1, stMembership: -1, stApp: -1, stRepl: -1}
		m.onArrive = func(f Frame, _ time.Time) {
			if f.Kind != FrameData {
				return
			}
			if f.First {
				if int64(f.Envelope) <= started[f.Stream] {
					return // an empty envelope resent at a resume boundary
				}
				started[f.Stream] = int64(f.Envelope)
			}
			if !f.Last {
				return
			}
			e := byHandle[f.Handle]
			e.delivered++
			k := [2]uint64{uint64(e.stream), e.key}
			order[k] = append(order[k], e)
		}
		var total int64
		for i := range rapid.IntRange(1, 40).Draw(t, "envelopes") {
			at := time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "at"))
			st := rapid.SampledFrom([]StreamID{stControl, stMembership, stApp, stRepl}).Draw(t, "stream")
			size := rapid.IntRange(0, int(4*window)).Draw(t, "size")
			total += int64(size)
			e := &env{stream: st, key: rapid.Uint64Range(0, 2).Draw(t, "key")}
			envs = append(envs, e)
			cancelAt := time.Duration(-1)
			if rapid.IntRange(0, 9).Draw(t, "cancel?") == 0 {
				cancelAt = at + time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "cancelAfter"))
			}
			m.at(t0.Add(at+time.Duration(i)), func() {
				e.h = m.enqueue(st, e.key, size)
				byHandle[e.h] = e
				enqueued = append(enqueued, e)
				if cancelAt >= 0 {
					m.at(t0.Add(cancelAt+time.Duration(i)), func() {
						e.cancelled = m.s.Cancel(e.h)
						m.pump()
					})
				}
			})
		}
		for range rapid.IntRange(0, 3).Draw(t, "cuts") {
			m.at(t0.Add(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(t, "cutAt"))), m.cut)
		}
		slowest := rate
		if m.consumeRate > 0 {
			slowest = m.consumeRate
		}
		budget := 5*time.Second + 20*time.Duration(float64(total)/slowest*float64(time.Second)) + 200*rtt
		m.runUntil(t0.Add(budget))

		if m.s.Pending() != 0 {
			t.Fatalf("stalled: %d envelopes pending after %v of virtual time (credit %d, in flight %d, cwnd %d)",
				m.s.Pending(), budget, m.s.Credit(stApp).Available(), m.s.Estimator().Inflight(), m.s.Estimator().CWnd())
		}
		for _, e := range envs {
			want := 1
			if e.cancelled != CancelUnknown {
				want = 0
			}
			if e.delivered != want {
				t.Fatalf("envelope on stream %d key %d (cancel %v) delivered %d times, want %d", e.stream, e.key, e.cancelled, e.delivered, want)
			}
		}
		for k, got := range order {
			i := 0
			for _, e := range enqueued {
				if [2]uint64{uint64(e.stream), e.key} == k && e.delivered > 0 {
					if got[i] != e {
						t.Fatalf("stream %d key %d: delivery %d out of enqueue order", k[0], k[1], i)
					}
					i++
				}
			}
		}
	})
}
