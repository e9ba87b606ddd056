package cluster

import (
	"errors"
	"testing"
	"time"
)

func TestZeroConfigMeansDefaults(t *testing.T) {
	c := Config{Advertise: "10.0.0.1:7400"}.WithDefaults()
	if c.Timings != DefaultTimings() || c.ActiveView != 5 || c.PassiveView != 30 || c.Confirmations != 2 || c.ClusterName != "troupe" {
		t.Fatalf("expected the documented defaults for zero fields; got %+v", c)
	}
	if err := (Config{Advertise: "10.0.0.1:7400"}).Validate(); err != nil {
		t.Fatalf("expected a config with only Advertise to be valid; got %v", err)
	}
}

func TestPresetsAreValid(t *testing.T) {
	for name, c := range map[string]Config{"default": DefaultConfig("h:1"), "fast": FastConfig("h:1")} {
		if err := c.Validate(); err != nil {
			t.Errorf("expected the %s preset to validate; got %v", name, err)
		}
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	base := func() Config { return FastConfig("10.0.0.1:7400") }
	cases := []struct {
		field string
		mod   func(*Config)
	}{
		{"Advertise", func(c *Config) { c.Advertise = "no-port" }},
		{"Advertise", func(c *Config) { c.Advertise = ""; c.Bind = "0.0.0.0:7400" }},
		{"Bind", func(c *Config) { c.Bind = "x" }},
		{"Seeds[1]", func(c *Config) { c.Seeds = []string{"a:1", "b"} }},
		{"Timings.SuspectAfter", func(c *Config) { c.Timings.SuspectAfter = c.Timings.Heartbeat }},
		{"Timings.DeadAfter", func(c *Config) { c.Timings.DeadAfter = c.Timings.Heartbeat / 2 }},
		{"Timings.RemoveAfter", func(c *Config) { c.Timings.RemoveAfter = c.Timings.DeadAfter / 2 }},
		{"Timings.AntiEntropy", func(c *Config) { c.Timings.AntiEntropy = c.Timings.Heartbeat / 2 }},
		{"Timings.TombstoneTTL", func(c *Config) { c.Timings.TombstoneTTL = c.Timings.AntiEntropy }},
		{"Timings.Heartbeat", func(c *Config) { c.Timings.Heartbeat = -time.Second }},
		{"ActiveView", func(c *Config) { c.ActiveView = -1 }},
		{"Confirmations", func(c *Config) { c.Confirmations = 9 }},
		{"ActorTypes[0]", func(c *Config) { c.ActorTypes = []string{""} }},
		{"AddressMap[a:1]", func(c *Config) { c.AddressMap = map[string]string{"a:1": "bad"} }},
	}
	for _, tc := range cases {
		c := base()
		tc.mod(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("expected a ConfigError naming %s; got %v", tc.field, err)
		}
	}
}
