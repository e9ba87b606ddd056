package remote

import (
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/ring"
)

func TestAnAskReachingAMemberNotJoinedYetIsPlacedAgainOnceTheViewChanges(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	key := keyWhere(t, func(k string) bool { return ownerIn(k, a, b) == b.id })
	a.setView(a, b) // b has no view yet: it has not joined
	done := make(chan error, 1)
	go func() {
		_, err := actor.Ask(ctxT(t), counter.Ref(a, key), get{})
		done <- err
	}()
	// b turns out to be joining: a places the key on itself once told.
	a.r.Update(a.id, true, []cluster.Member{
		{ID: a.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter", "seq"}},
		{ID: b.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter", "seq"}, Joining: true},
	})
	if err := <-done; err != nil {
		t.Fatalf("expected the ask b could not place to be placed again and answered; got %v", err)
	}
}

func TestAMemberThatSaysJoiningGetsNoKeys(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.r.Update(a.id, true, []cluster.Member{
		{ID: a.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
		{ID: b.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}, Joining: true},
	})
	for i := range 50 {
		key := "j" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		to, here, err := a.r.view.Load().dest(a.r.kind("counter"), "counter", key, a.r.Token("counter", key))
		if err != nil || !here || to != a.id {
			t.Fatalf("expected every key on a while b says Joining; %s goes to %v (%v)", key, to, err)
		}
	}
}

// A view shows a member's entry into the rings once it holds the member
// past its joining, whatever became of it since, or a newer process at
// its address that entered: an acquisition refused by a floor of that
// member's hand-off waits until then (system's awaitEntered).
func TestAViewShowsAMembersEntryOnceItIsPastItsJoining(t *testing.T) {
	ns := newTestNodes(t, "a:1")
	a := ns[0]
	joining := ring.NodeID{Addr: "j:1", Incarnation: 4}
	ready := ring.NodeID{Addr: "r:1", Incarnation: 4}
	dead := ring.NodeID{Addr: "d:1", Incarnation: 4}
	left := ring.NodeID{Addr: "l:1", Incarnation: 4}
	older := ring.NodeID{Addr: "r:1", Incarnation: 2}
	olderThanJoining := ring.NodeID{Addr: "j:1", Incarnation: 2}
	unknown := ring.NodeID{Addr: "u:1", Incarnation: 4}
	a.r.Update(a.id, true, []cluster.Member{
		{ID: a.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
		{ID: joining, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}, Joining: true},
		{ID: ready, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
		{ID: dead, Status: cluster.StatusDead, ActorTypes: []string{"counter"}},
		{ID: left, Status: cluster.StatusLeft, ActorTypes: []string{"counter"}},
	})
	for _, c := range []struct {
		id   ring.NodeID
		want bool
	}{
		{a.id, true}, {ready, true}, {dead, true}, {left, true}, {older, true},
		{joining, false}, {olderThanJoining, false}, {unknown, false},
	} {
		if got := a.r.Entered(c.id); got != c.want {
			t.Errorf("Entered(%v) = %v, want %v", c.id, got, c.want)
		}
	}
}

// A view shows a member departed once it holds it leaving or left, a
// newer process took its address, or it does not hold it at all (removed,
// or unknown): no ring of the view holds it, whatever the type. A dead
// member stays in the rings until it is removed, and a joining one is
// still to enter them: neither has departed, whichever types they host.
func TestAViewShowsAMemberDepartedOnceNoRingCanHoldIt(t *testing.T) {
	ns := newTestNodes(t, "a:1")
	a := ns[0]
	ready := ring.NodeID{Addr: "r:1", Incarnation: 4}
	dead := ring.NodeID{Addr: "d:1", Incarnation: 4}
	left := ring.NodeID{Addr: "l:1", Incarnation: 4}
	leaving := ring.NodeID{Addr: "g:1", Incarnation: 4}
	joining := ring.NodeID{Addr: "j:1", Incarnation: 4}
	older := ring.NodeID{Addr: "r:1", Incarnation: 2}
	unknown := ring.NodeID{Addr: "u:1", Incarnation: 4}
	other := ring.NodeID{Addr: "o:1", Incarnation: 4}
	a.r.Update(a.id, true, []cluster.Member{
		{ID: a.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
		{ID: ready, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
		{ID: dead, Status: cluster.StatusDead, ActorTypes: []string{"counter"}},
		{ID: left, Status: cluster.StatusLeft, ActorTypes: []string{"counter"}},
		{ID: leaving, Status: cluster.StatusLeaving, ActorTypes: []string{"counter"}},
		{ID: joining, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}, Joining: true},
		{ID: other, Status: cluster.StatusAlive, ActorTypes: []string{"other"}},
	})
	for _, c := range []struct {
		id   ring.NodeID
		want bool
	}{
		{a.id, false}, {ready, false}, {dead, false}, {joining, false}, {other, false},
		{left, true}, {leaving, true}, {older, true}, {unknown, true},
	} {
		if got := a.r.Departed(c.id); got != c.want {
			t.Errorf("Departed(%v) = %v, want %v", c.id, got, c.want)
		}
	}
}

// ViewNow answers over the view of the moment it was called: a later
// update does not change what it shows.
func TestAViewTakenNowDoesNotFollowLaterChanges(t *testing.T) {
	ns := newTestNodes(t, "a:1")
	a := ns[0]
	b := ring.NodeID{Addr: "b:1", Incarnation: 4}
	a.r.Update(a.id, true, []cluster.Member{
		{ID: a.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
		{ID: b, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
	})
	entered, departed := a.r.ViewNow()
	a.r.Update(a.id, true, []cluster.Member{
		{ID: a.id, Status: cluster.StatusAlive, ActorTypes: []string{"counter"}},
		{ID: b, Status: cluster.StatusLeft, ActorTypes: []string{"counter"}},
	})
	if !entered(b) || departed(b) {
		t.Fatalf("the view taken before b left shows it entered %v and departed %v, want entered, not departed", entered(b), departed(b))
	}
	if !a.r.Departed(b) {
		t.Fatal("the current view does not show b departed")
	}
}
