package noderecord

import "time"

// Timings are the heartbeat and the two thresholds that follow from its
// silence. The zero value of each field means its default.
type Timings struct {
	// Heartbeat is how often a process puts its record. Default 5 s.
	Heartbeat time.Duration
	// UnhealthyAfter is the silence (no accepted update) after which a
	// reader shows the record as unhealthy, whatever it says. Must
	// exceed Heartbeat. Default 15 s.
	UnhealthyAfter time.Duration
	// LeaseTTL is the silence after which the store drops the record.
	// Must exceed UnhealthyAfter, so that a silent process is seen
	// unhealthy before it vanishes. Default 30 s.
	LeaseTTL time.Duration
}

// DefaultTimings returns 5 s, 15 s and 30 s.
func DefaultTimings() Timings {
	return Timings{Heartbeat: 5 * time.Second, UnhealthyAfter: 15 * time.Second, LeaseTTL: 30 * time.Second}
}

// WithDefaults returns t with every zero field set to its default.
func (t Timings) WithDefaults() Timings {
	d := DefaultTimings()
	if t.Heartbeat == 0 {
		t.Heartbeat = d.Heartbeat
	}
	if t.UnhealthyAfter == 0 {
		t.UnhealthyAfter = d.UnhealthyAfter
	}
	if t.LeaseTTL == 0 {
		t.LeaseTTL = d.LeaseTTL
	}
	return t
}

// Validate rejects negative timings and any that break
// Heartbeat < UnhealthyAfter < LeaseTTL, after defaults are applied to
// zero fields, with a *ConfigError naming the field.
func (t Timings) Validate() error {
	t = t.WithDefaults()
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Timings.Heartbeat", t.Heartbeat}, {"Timings.UnhealthyAfter", t.UnhealthyAfter}, {"Timings.LeaseTTL", t.LeaseTTL}} {
		if f.v < 0 {
			return &ConfigError{Field: f.name, Reason: "must not be negative"}
		}
	}
	switch {
	case t.UnhealthyAfter <= t.Heartbeat:
		return &ConfigError{Field: "Timings.UnhealthyAfter", Reason: "must exceed Heartbeat, or every heartbeat's delay shows the process unhealthy"}
	case t.LeaseTTL <= t.UnhealthyAfter:
		return &ConfigError{Field: "Timings.LeaseTTL", Reason: "must exceed UnhealthyAfter, or a silent process vanishes before it is seen unhealthy"}
	}
	return nil
}

// Health returns the health a reader shows for r at now: Unhealthy once
// r has gone UnhealthyAfter without an accepted update, else what r
// says. now is the snapshot's time (Snapshot.At), so that every reader
// of one snapshot agrees.
func (t Timings) Health(r Record, now time.Time) Health {
	t = t.WithDefaults()
	if !r.Observed.IsZero() && now.Sub(r.Observed) >= t.UnhealthyAfter {
		return Unhealthy
	}
	return r.Health
}
