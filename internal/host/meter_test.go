package host

import (
	"testing"
	"time"
)

func TestObserveAskCountsEachAskInTheBucketOfItsDurationAndByOutcome(t *testing.T) {
	var m TypeMeter
	for _, c := range []struct {
		d      time.Duration
		o      Outcome
		bucket int
	}{
		{time.Microsecond, OutcomeOK, 0},
		{50 * time.Microsecond, OutcomeOK, 0}, // a bound is its bucket's upper end, included
		{51 * time.Microsecond, OutcomeOK, 1},
		{3 * time.Millisecond, OutcomeFailed, 6},
		{10 * time.Second, OutcomeTimeout, len(AskBounds) - 1},
		{11 * time.Second, OutcomeTimeout, len(AskBounds)},
	} {
		ok := 0
		if c.o == OutcomeOK {
			ok = 1
		}
		before := m.AskBuckets[ok][c.bucket].Load()
		m.ObserveAsk(c.d, c.o)
		if got := m.AskBuckets[ok][c.bucket].Load(); got != before+1 {
			t.Errorf("an ask of %v (%v) left bucket %d at %d, want %d", c.d, c.o, c.bucket, got, before+1)
		}
	}
	for o, want := range map[Outcome]uint64{OutcomeOK: 3, OutcomeFailed: 1, OutcomeTimeout: 2, OutcomeRefused: 0} {
		if got := m.Asks(o); got != want {
			t.Errorf("Asks(%v) = %d, want %d", o, got, want)
		}
	}
	if want := uint64(time.Microsecond + 101*time.Microsecond + 3*time.Millisecond + 21*time.Second); m.AskNanos.Load() != want {
		t.Errorf("AskNanos = %d, want the sum of the durations, %d", m.AskNanos.Load(), want)
	}
}
