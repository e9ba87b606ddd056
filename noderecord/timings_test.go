package noderecord

import (
	"errors"
	"testing"
	"time"
)

func TestZeroTimingsAreTheDefaultsAndValid(t *testing.T) {
	got := Timings{}.WithDefaults()
	if got != DefaultTimings() || got != (Timings{Heartbeat: 5 * time.Second, UnhealthyAfter: 15 * time.Second, LeaseTTL: 30 * time.Second}) {
		t.Errorf("Timings{}.WithDefaults() = %+v, want 5 s, 15 s, 30 s", got)
	}
	if err := (Timings{}).Validate(); err != nil {
		t.Errorf("Timings{}.Validate() = %v", err)
	}
}

func TestTimingsValidateNamesTheFieldThatBreaksTheOrder(t *testing.T) {
	cases := []struct {
		t     Timings
		field string
	}{
		{Timings{Heartbeat: -time.Second}, "Timings.Heartbeat"},
		{Timings{LeaseTTL: -time.Second}, "Timings.LeaseTTL"},
		{Timings{Heartbeat: 15 * time.Second}, "Timings.UnhealthyAfter"},
		{Timings{Heartbeat: 20 * time.Second}, "Timings.UnhealthyAfter"},
		{Timings{UnhealthyAfter: 30 * time.Second}, "Timings.LeaseTTL"},
		{Timings{LeaseTTL: 10 * time.Second}, "Timings.LeaseTTL"},
	}
	for _, c := range cases {
		err := c.t.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: Validate = %v, want a *ConfigError naming %s that matches ErrInvalidConfig", c.t, err, c.field)
		}
	}
	if err := (Timings{Heartbeat: time.Second, UnhealthyAfter: 2 * time.Second, LeaseTTL: 3 * time.Second}).Validate(); err != nil {
		t.Errorf("1 s < 2 s < 3 s: Validate = %v", err)
	}
}

func TestTimingsHealthShowsASilentRecordUnhealthy(t *testing.T) {
	r := Record{Health: Healthy, Observed: time.Unix(100, 0)}
	tm := DefaultTimings()
	if h := tm.Health(r, r.Observed.Add(tm.UnhealthyAfter-time.Millisecond)); h != Healthy {
		t.Errorf("just before UnhealthyAfter: %v, want healthy", h)
	}
	if h := tm.Health(r, r.Observed.Add(tm.UnhealthyAfter)); h != Unhealthy {
		t.Errorf("at UnhealthyAfter: %v, want unhealthy", h)
	}
	if h := tm.Health(Record{Health: Degraded}, time.Now()); h != Degraded {
		t.Errorf("never observed: %v, want what it says, degraded", h)
	}
}
