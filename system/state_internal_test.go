package system

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicanode"
	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/ring"
)

func TestOnlyAnAcquisitionLostBeforeItRanIsMadeAgain(t *testing.T) {
	ep := &localEndpoint{self: ring.NodeID{Addr: "a", Incarnation: 1}}
	node, err := replicanode.Open(context.Background(), replicanode.Config{Endpoint: ep, Store: replicastore.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	s := &states{log: slog.New(slog.DiscardHandler), node: node}
	defer s.detach(context.Background())
	k := replica.Key{Type: "t", ID: "k"}
	for _, tc := range []struct {
		err   error
		again bool
	}{
		{stateErr(&replicanode.StaleOwnerError{Key: k, Newer: replica.Epoch{Term: 2}}), true},
		{stateErr(fmt.Errorf("write: %w", replicanode.ErrResigned)), true},
		{stateErr(replica.ErrNotServing), true},
		{stateErr(fmt.Errorf("%w: acquire: %w", replicanode.ErrUnavailable, context.DeadlineExceeded)), false},
		{stateErr(replicanode.ErrClosed), false},
		{errors.New("a store failure"), false},
	} {
		for attempt := 1; attempt <= acquireAttempts; attempt++ {
			wait, again := s.Retry("t", "k", fmt.Errorf("troupe: t/k: read: %w", tc.err), attempt)
			if want := tc.again && attempt < acquireAttempts; again != want {
				t.Fatalf("Retry(%v, %d) = %v, want %v", tc.err, attempt, again, want)
			}
			if again && (wait <= 0 || wait > time.Second) {
				t.Fatalf("Retry(%v, %d) waits %v", tc.err, attempt, wait)
			}
		}
		if !errors.Is(tc.err, actor.ErrUnavailable) && tc.again {
			t.Fatalf("%v does not match ErrUnavailable", tc.err)
		}
	}
	// A key the view now places elsewhere is left to its owner.
	s.placed = func(typ, key string) bool { return false }
	if _, again := s.Retry("t", "k", stateErr(&replicanode.StaleOwnerError{Key: k, Newer: replica.Epoch{Term: 2}}), 1); again {
		t.Fatal("Retry acquires again a key placed on another member")
	}
}
