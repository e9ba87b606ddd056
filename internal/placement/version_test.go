package placement

import (
	"testing"

	"github.com/troupe-go/troupe/ring"
)

var (
	a = ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 1}
	b = ring.NodeID{Addr: "10.0.0.2:7400", Incarnation: 2}
	c = ring.NodeID{Addr: "10.0.0.3:7400", Incarnation: 3}
)

func servingExcept(down ...ring.NodeID) func(ring.NodeID) bool {
	return func(id ring.NodeID) bool {
		for _, d := range down {
			if id == d {
				return false
			}
		}
		return true
	}
}

// The token the admin API reported before the computation moved here:
// operators and scripts compare tokens across members of one build, but a
// silent change of the encoding would still be a surprise.
func TestVersionIsTheTokenTheAdminAPIAlwaysReported(t *testing.T) {
	rings := map[string]*ring.Ring{"counter": ring.New([]ring.NodeID{a, b, c}), "cart": ring.New([]ring.NodeID{a, b})}
	if got, want := Version(rings, servingExcept(b)), "1b8a099996b9aad653183ee15f9d2823"; got != want {
		t.Errorf("Version = %s, want %s (the admin API's token for two types, b dead)", got, want)
	}
	if got, want := Version(map[string]*ring.Ring{}, servingExcept()), "62525c94196e040cd170025bee5903a2"; got != want {
		t.Errorf("Version of no rings = %s, want %s", got, want)
	}
}

func TestVersionDependsOnThePlacementRelevantSetOnly(t *testing.T) {
	base := Version(map[string]*ring.Ring{"counter": ring.New([]ring.NodeID{a, b, c})}, servingExcept())
	// The same set, built in another order and with a distinct ring
	// value: the same token.
	if got := Version(map[string]*ring.Ring{"counter": ring.New([]ring.NodeID{c, a, b})}, servingExcept()); got != base {
		t.Errorf("the same member set in another order gave %s, want %s", got, base)
	}
	for name, got := range map[string]string{
		"a member dead":     Version(map[string]*ring.Ring{"counter": ring.New([]ring.NodeID{a, b, c})}, servingExcept(c)),
		"a member gone":     Version(map[string]*ring.Ring{"counter": ring.New([]ring.NodeID{a, b})}, servingExcept()),
		"a new incarnation": Version(map[string]*ring.Ring{"counter": ring.New([]ring.NodeID{a, b, {Addr: c.Addr, Incarnation: 4}})}, servingExcept()),
		"another type too":  Version(map[string]*ring.Ring{"counter": ring.New([]ring.NodeID{a, b, c}), "cart": ring.New([]ring.NodeID{a})}, servingExcept()),
		"the type renamed":  Version(map[string]*ring.Ring{"counters": ring.New([]ring.NodeID{a, b, c})}, servingExcept()),
	} {
		if got == base {
			t.Errorf("%s: the token stayed %s, want another", name, base)
		}
	}
	// A member that is not in any ring does not count, serving or not.
	if got := Version(map[string]*ring.Ring{"counter": ring.New([]ring.NodeID{a, b, c})}, servingExcept(ring.NodeID{Addr: "elsewhere:1", Incarnation: 1})); got != base {
		t.Errorf("a down process outside the rings changed the token to %s, want %s", got, base)
	}
}
