package remote

import (
	"errors"
	"slices"
	"testing"

	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/ring"
)

func TestReplicasWalkTheFullRingDeadMembersIncluded(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1", "c:1", "d:1")
	a := ns[0]
	tok := uint64(ring.KeyToken("counter", "k"))
	if _, err := a.r.Replicas(nil, "counter", tok, 3); !errors.Is(err, fault.ErrUnavailable) {
		t.Fatalf("replicas before any view: %v, want ErrUnavailable", err)
	}
	a.setViewStatus(map[*testNode]bool{ns[0]: true, ns[1]: false, ns[2]: true, ns[3]: false})
	got, err := a.r.Replicas(nil, "counter", tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	all := []ring.NodeID{ns[0].id, ns[1].id, ns[2].id, ns[3].id}
	want := ring.New(all).AppendReplicas(nil, ring.Token(tok), 3)
	if !slices.Equal(got, want) {
		t.Fatalf("replicas %v, want the full ring's %v (dead members included)", got, want)
	}
	if got, _ := a.r.Replicas(nil, "counter", tok, 7); len(got) != 4 {
		t.Fatalf("7 replicas on a ring of 4 gave %v, want the 4 members", got)
	}
}

// The previous replicas are the set on the type's ring before its latest
// change, kept through views that change only statuses (a dead member
// stays in the ring) until the ring changes again.
func TestPreviousReplicasAreTheRingBeforeTheLatestChangeUntilTheNext(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1", "c:1", "d:1")
	a := ns[0]
	tok := uint64(ring.KeyToken("counter", "k"))
	a.setView(ns[0], ns[1])
	if _, ok := a.r.PreviousReplicas(nil, "counter", tok, 2); ok {
		t.Fatal("previous replicas before any change of ring")
	}
	a.setView(ns[0], ns[1], ns[2])
	want := ring.New([]ring.NodeID{ns[0].id, ns[1].id}).AppendReplicas(nil, ring.Token(tok), 2)
	if got, ok := a.r.PreviousReplicas(nil, "counter", tok, 2); !ok || !slices.Equal(got, want) {
		t.Fatalf("previous replicas %v (%v), want %v", got, ok, want)
	}
	a.setViewStatus(map[*testNode]bool{ns[0]: true, ns[1]: true, ns[2]: false})
	if got, ok := a.r.PreviousReplicas(nil, "counter", tok, 2); !ok || !slices.Equal(got, want) {
		t.Fatalf("after a change of status only: previous replicas %v (%v), want %v", got, ok, want)
	}
	a.setView(ns...)
	want = ring.New([]ring.NodeID{ns[0].id, ns[1].id, ns[2].id}).AppendReplicas(nil, ring.Token(tok), 2)
	if got, ok := a.r.PreviousReplicas(nil, "counter", tok, 2); !ok || !slices.Equal(got, want) {
		t.Fatalf("after the next change: previous replicas %v (%v), want %v", got, ok, want)
	}
}
