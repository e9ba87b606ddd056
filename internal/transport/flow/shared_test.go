package flow

import (
	"testing"
	"time"
)

// Two connections (one node's peers) share one 100 Mbit/s bottleneck, the
// second starting 2 s after the first. Together they keep the link busy,
// neither starves, and the queue they build stays bounded (ProbeRTT keeps
// their min RTTs true). The queue is about one BDP, as with BBR v1 flows:
// see "Known gaps" in doc.go.
func TestConnectionsSharingABottleneck(t *testing.T) {
	tests := []struct {
		name     string
		rtts     [2]time.Duration
		minShare float64
	}{
		{"equal RTTs", [2]time.Duration{20 * time.Millisecond, 20 * time.Millisecond}, 0.3},
		{"10 ms and 40 ms", [2]time.Duration{10 * time.Millisecond, 40 * time.Millisecond}, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{now: t0}
			link := &simLink{rate: 12.5e6}
			a := newSimOn(t, w, link, simConfig(), RecvConfig{}, tt.rtts[0])
			b := newSimOn(t, w, link, simConfig(), RecvConfig{}, tt.rtts[1])
			end := t0.Add(20 * time.Second)
			a.keepBacklogged(stApp, 256<<10, end)
			w.runUntil(t0.Add(2 * time.Second))
			b.keepBacklogged(stApp, 256<<10, end)
			w.runUntil(t0.Add(10 * time.Second))
			var queueSum, queueMax time.Duration
			var writes int
			for _, m := range []*sim{a, b} {
				m.onWrite = func(Frame) {
					q := max(link.linkFree.Sub(w.now), 0)
					queueSum += q
					queueMax = max(queueMax, q)
					writes++
				}
			}
			fromA, fromB := a.written, b.written
			w.runUntil(end)
			ga, gb := float64(a.written-fromA)/10, float64(b.written-fromB)/10
			t.Logf("goodput %.3g + %.3g = %.3g of %.3g B/s; queue mean %v max %v",
				ga, gb, ga+gb, link.rate, queueSum/time.Duration(writes), queueMax)
			if !within(ga+gb, link.rate, 0.1) {
				t.Errorf("together %.3g B/s, want the link's %.3g ±10%%", ga+gb, link.rate)
			}
			if min(ga, gb) < tt.minShare*link.rate {
				t.Errorf("shares %.3g and %.3g, want each at least %.0f%% of the link", ga, gb, 100*tt.minShare)
			}
			if longest := max(tt.rtts[0], tt.rtts[1]); queueMax > 2*longest {
				t.Errorf("queue peaked at %v, want under two of the longer RTT (%v)", queueMax, 2*longest)
			}
		})
	}
}
