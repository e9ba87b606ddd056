package transport

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/wire"
)

func TestConfigZeroValuesMeanTheDefaults(t *testing.T) {
	c := withDefaults(wire.Config{ClusterName: "c"})
	if c.HandshakeTimeout != 5*time.Second || c.KeepaliveAfter != 15*time.Second || c.KeepaliveTimeout != 5*time.Second ||
		c.RedialMin != 100*time.Millisecond || c.RedialMax != 15*time.Second ||
		c.Limits != (wire.Limits{MaxFrame: 256 << 10, MaxMessage: 4 << 20, Window: 8 << 20}) || c.Incarnation == 0 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if g := resumeGrace(&c); g != 35*time.Second {
		t.Fatalf("resume grace: want 2×15 s + 5 s, got %v", g)
	}
}

func TestAddressMapAppliesAtDial(t *testing.T) {
	c := wire.Config{AddressMap: map[string]string{"10.0.0.1:7000": "127.0.0.1:17000"}}
	if got := dialAddress(&c, "10.0.0.1:7000"); got != "127.0.0.1:17000" {
		t.Fatalf("mapped address: got %s", got)
	}
	if got := dialAddress(&c, "10.0.0.2:7000"); got != "10.0.0.2:7000" {
		t.Fatalf("unmapped address: got %s", got)
	}
}
