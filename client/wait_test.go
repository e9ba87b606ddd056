package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
)

func TestClientWaitAliveReturnsTheMembersOnceAllAreAlive(t *testing.T) {
	systems := systemtest.StartCluster(t, 3, nil, Counter)
	c := newClient(t, systems[0].Addr())
	ms, err := c.WaitAlive(systemtest.Ctx(t), 3)
	if err != nil {
		t.Fatalf("WaitAlive(3): %v", err)
	}
	alive := 0
	for _, m := range ms {
		if m.Status == cluster.StatusAlive {
			alive++
		}
	}
	if alive != 3 {
		t.Fatalf("WaitAlive(3) returned %v, want 3 members alive", ms)
	}
}

func TestClientWaitAliveEndsWithCtxAndSaysWhatItSaw(t *testing.T) {
	systems := systemtest.StartCluster(t, 1, nil, Counter)
	c := newClient(t, systems[0].Addr())
	ctx, cancel := context.WithTimeout(systemtest.Ctx(t), 50*time.Millisecond)
	defer cancel()
	_, err := c.WaitAlive(ctx, 2)
	var we *client.WaitError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *WaitError matching DeadlineExceeded", err)
	}
	if we.Alive != 2 || len(we.Seen) != 1 || we.Seen[0].ID.Addr != systems[0].Addr() {
		t.Fatalf("WaitError = %+v, want 2 wanted and the lone member seen", we)
	}
}
