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

func TestConfigZeroValuesMeanTheDefaults(t *testing.T) {
	c := Config{ClusterName: "c"}.withDefaults()
	if c.HandshakeTimeout != 5*time.Second || c.KeepaliveAfter != 15*time.Second || c.KeepaliveTimeout != 5*time.Second ||
		c.RedialMin != 100*time.Millisecond || c.RedialMax != 15*time.Second ||
		c.Limits != (Limits{MaxFrame: 256 << 10, MaxMessage: 4 << 20, Window: 256 << 10}) || c.Incarnation == 0 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if g := c.resumeGrace(); g != 35*time.Second {
		t.Fatalf("resume grace: want 2×15 s + 5 s, got %v", g)
	}
}

func TestAddressMapAppliesAtDial(t *testing.T) {
	c := Config{AddressMap: map[string]string{"10.0.0.1:7000": "127.0.0.1:17000"}}
	if got := c.dialAddress("10.0.0.1:7000"); got != "127.0.0.1:17000" {
		t.Fatalf("mapped address: got %s", got)
	}
	if got := c.dialAddress("10.0.0.2:7000"); got != "10.0.0.2:7000" {
		t.Fatalf("unmapped address: got %s", got)
	}
}
