package cluster

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/ring"
)

func TestMemberCloneIsDeep(t *testing.T) {
	m := Member{ID: ring.NodeID{Addr: "a:1", Incarnation: 1}, Incarnation: 2, Status: StatusSuspect,
		ActorTypes: []string{"cart"}, Accusers: []string{"b:1"}}
	c := m.Clone()
	if !c.Equal(m) {
		t.Fatalf("expected a clone equal to the original; got %v and %v", c, m)
	}
	c.ActorTypes[0], c.Accusers[0] = "order", "c:1"
	if m.ActorTypes[0] != "cart" || m.Accusers[0] != "b:1" {
		t.Errorf("expected the clone's lists not to share the original's; original now %v %v", m.ActorTypes, m.Accusers)
	}
	if c.Equal(m) {
		t.Error("expected records with different lists not to be equal")
	}
	if got := m.String(); got != "a:1#1@2:suspect" {
		t.Errorf("expected id@incarnation:status; got %q", got)
	}
}

func TestStatusMembershipAndMajority(t *testing.T) {
	cases := []struct {
		s              Status
		name           string
		inSet, counted bool
	}{
		{StatusAlive, "alive", true, true},
		{StatusLeaving, "leaving", true, false},
		{StatusSuspect, "suspect", true, false},
		{StatusDead, "dead", true, false},
		{StatusLeft, "left", false, false},
	}
	for _, c := range cases {
		if c.s.String() != c.name || c.s.InMemberSet() != c.inSet || c.s.SeenAlive() != c.counted {
			t.Errorf("expected %s: in member set %v, seen alive %v; got %q, %v, %v",
				c.name, c.inSet, c.counted, c.s.String(), c.s.InMemberSet(), c.s.SeenAlive())
		}
	}
	if got := Status(9).String(); got != "status(9)" {
		t.Errorf("expected an unknown status to render as status(9); got %q", got)
	}
}

// The actor layer takes a link for broken after WireSilence: the
// keepalive sent after SuspectAfter of silence would have been answered.
func TestWireSilenceIsOneAndAHalfSuspectAfter(t *testing.T) {
	if got, want := FastConfig("h:1").WireSilence(), 750*time.Millisecond; got != want {
		t.Errorf("expected 1.5 × FastTimings' SuspectAfter = %v; got %v", want, got)
	}
	if got, want := (Config{}).WireSilence(), 7500*time.Millisecond; got != want {
		t.Errorf("expected 1.5 × the default SuspectAfter = %v; got %v", want, got)
	}
}
