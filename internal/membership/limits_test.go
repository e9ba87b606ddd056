package membership

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/ring"
)

// cluster.Config.Validate keeps its own copy of the record limits (the
// public package cannot import this one); a config it accepts must yield
// records the codec accepts, and one past a limit must be refused there.
func TestConfigValidateAgreesWithTheRecordLimits(t *testing.T) {
	addr := func(n int) string { return strings.Repeat("h", n-len(":1")) + ":1" }
	cases := []struct {
		field   string
		atLimit func(*cluster.Config)
		past    func(*cluster.Config)
	}{
		{"Advertise",
			func(c *cluster.Config) { c.Advertise = addr(MaxAddrLen) },
			func(c *cluster.Config) { c.Advertise = addr(MaxAddrLen + 1) }},
		{"ActorTypes[0]",
			func(c *cluster.Config) { c.ActorTypes = []string{strings.Repeat("a", MaxActorTypeLen)} },
			func(c *cluster.Config) { c.ActorTypes = []string{strings.Repeat("a", MaxActorTypeLen+1)} }},
		{"Confirmations",
			func(c *cluster.Config) { c.Confirmations = maxAccusers },
			func(c *cluster.Config) { c.Confirmations = maxAccusers + 1 }},
	}
	for _, tc := range cases {
		c := cluster.FastConfig("10.0.0.1:7400")
		tc.atLimit(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s at the record limit: expected a valid config; got %v", tc.field, err)
			continue
		}
		self := Member{ID: ring.NodeID{Addr: c.Advertise, Incarnation: 1}, ActorTypes: c.ActorTypes}
		b, err := EncodeMember(self)
		if err == nil {
			_, err = DecodeMember(b)
		}
		if err != nil {
			t.Errorf("%s at the limit Validate accepts: expected the codec to accept the record; got %v", tc.field, err)
		}
		c = cluster.FastConfig("10.0.0.1:7400")
		tc.past(&c)
		var ce *cluster.ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s one past the record limit: expected a ConfigError naming it; got %v", tc.field, err)
		}
	}
}
