package flow

import (
	"testing"
	"time"
)

func TestPacerZeroValueDoesNotPace(t *testing.T) {
	var p Pacer
	p.Spend(1<<20, t0)
	if d := p.Delay(ClassData, 1<<20, t0); d != 0 {
		t.Errorf("zero Pacer Delay = %v, want 0: rate 0 means unpaced", d)
	}
}

func TestPacerDelayIsDeficitOverRate(t *testing.T) {
	tests := []struct {
		name  string
		spend int
		ask   int
		want  time.Duration
	}{
		{"a full bucket sends at once", 0, 1000, 0},
		{"an empty bucket waits for the bytes", 2000, 1000, time.Millisecond},
		{"a debt is repaid first", 3000, 1000, 2 * time.Millisecond},
		{"a send larger than the burst waits for a full bucket only", 2000, 10_000, 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPacer(2000, 0)
			p.SetRate(1e6, t0) // 1000 bytes per millisecond
			p.Spend(tt.spend, t0)
			if got := p.Delay(ClassData, tt.ask, t0); got != tt.want {
				t.Errorf("Delay(%d) after spending %d of a 2000-byte bucket at 1 MB/s = %v, want %v", tt.ask, tt.spend, got, tt.want)
			}
		})
	}
}

func TestPacerBypassClassesNeverWait(t *testing.T) {
	p := NewPacer(2000, 0)
	p.SetRate(1e3, t0)
	p.Spend(1<<20, t0)
	for _, c := range []Class{ClassControl, ClassMembership} {
		if d := p.Delay(c, 1000, t0); d != 0 {
			t.Errorf("Delay(%v) with a deep debt = %v, want 0", c, d)
		}
	}
	if d := p.Delay(ClassData, 1000, t0); d == 0 {
		t.Error("Delay(data) with a deep debt = 0, want a wait: bypass bytes are still charged")
	}
}

func TestPacerRefillIsCappedAtBurst(t *testing.T) {
	p := NewPacer(2000, 0)
	p.SetRate(1e6, t0)
	later := t0.Add(time.Hour)
	p.Spend(4000, later)
	if got := p.Delay(ClassData, 2000, later); got != 4*time.Millisecond {
		t.Errorf("after an idle hour and 4000 bytes, Delay(2000) = %v, want 4ms: idle time banks at most one burst", got)
	}
}

func TestPacerRateChangeAppliesFromNow(t *testing.T) {
	p := NewPacer(10_000, 0)
	p.SetRate(1e6, t0)
	p.Spend(10_000, t0)
	// 2 ms at 1 MB/s refills 2000 bytes; then the rate doubles.
	p.SetRate(2e6, t0.Add(2*time.Millisecond))
	if got := p.Delay(ClassData, 4000, t0.Add(2*time.Millisecond)); got != time.Millisecond {
		t.Errorf("Delay(4000) = %v, want 1ms: 2000 bytes banked at the old rate, 2000 more at 2 MB/s", got)
	}
}

// Over a long run the pacer lets exactly rate × time bytes through, plus
// one burst, whatever the frame sizes.
func TestPacerLongRunRateIsExact(t *testing.T) {
	p := NewPacer(32<<10, 0)
	p.SetRate(6.25e6, t0)
	now := t0
	sent := 0
	for i := range 100_000 {
		n := []int{100, 16 << 10, 64 << 10, 1}[i%4]
		now = now.Add(p.Delay(ClassData, n, now))
		p.Spend(n, now)
		sent += n
	}
	elapsed := now.Sub(t0).Seconds()
	if rate := float64(sent-32<<10) / elapsed; !within(rate, 6.25e6, 0.001) {
		t.Errorf("long-run rate %.0f B/s, want 6.25e6 ±0.1%%", rate)
	}
}

func TestPacerBurstHoldsAMillisecondAtHighRates(t *testing.T) {
	p := NewPacer(32<<10, 0)
	p.SetRate(1.25e9, t0) // 10 Gbit/s
	if got := p.Burst(); got != 1.25e6 {
		t.Errorf("Burst() at 1.25 GB/s = %.0f, want 1.25e6 bytes (1 ms): a writer woken every millisecond must keep the link busy", got)
	}
	p.SetRate(6.25e6, t0)
	if got := p.Burst(); got != 32<<10 {
		t.Errorf("Burst() at 6.25 MB/s = %.0f, want the 32 KiB floor", got)
	}
}
