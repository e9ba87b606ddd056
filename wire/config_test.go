package wire

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidateNamesTheBadField(t *testing.T) {
	ok := Config{ClusterName: "c", Advertise: "10.0.0.1:7000"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a minimal config must validate: %v", err)
	}
	cases := map[string]func(*Config){
		"ClusterName":        func(c *Config) { c.ClusterName = "" },
		"Advertise":          func(c *Config) { c.Advertise = "no-port" },
		"Limits.MaxFrame":    func(c *Config) { c.Limits.MaxFrame = 1 },
		"Compression.Codecs": func(c *Config) { c.Compression.Codecs = []string{"lz4"} },
		"HandshakeTimeout":   func(c *Config) { c.HandshakeTimeout = -time.Second },
		"RedialMin":          func(c *Config) { c.RedialMin, c.RedialMax = time.Minute, time.Second },
		"SendQueue":          func(c *Config) { c.SendQueue = 1 },
		"TLS.CA":             func(c *Config) { c.TLS = &TLS{} },
	}
	for field, mutate := range cases {
		c := ok
		mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("bad %s: want an error naming it, got %v", field, err)
		}
	}
}
