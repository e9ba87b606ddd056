package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/ring"
)

func TestWaitErrorNamesWhatItSawAndMatchesTheContextsError(t *testing.T) {
	err := error(&cluster.WaitError{Alive: 3, Seen: []cluster.Member{
		{ID: ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 7}, Status: cluster.StatusAlive},
		{ID: ring.NodeID{Addr: "10.0.0.2:7400", Incarnation: 9}, Status: cluster.StatusSuspect},
		{ID: ring.NodeID{Addr: "10.0.0.3:7400", Incarnation: 4}, Status: cluster.StatusAlive, Joining: true},
	}, Err: context.DeadlineExceeded})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, DeadlineExceeded) = false", err)
	}
	for _, want := range []string{"3 members alive", "10.0.0.1:7400#7 alive", "10.0.0.2:7400#9 suspect", "10.0.0.3:7400#4 alive (joining)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Error() = %q, want it to contain %q", err.Error(), want)
		}
	}
	empty := &cluster.WaitError{Alive: 1, Err: context.Canceled}
	if !strings.Contains(empty.Error(), "no members") {
		t.Errorf("Error() with nothing seen = %q, want it to say no members", empty.Error())
	}
}
