package client_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
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
	var we *cluster.WaitError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *WaitError matching DeadlineExceeded", err)
	}
	if we.Alive != 2 || len(we.Seen) != 1 || we.Seen[0].ID.Addr != systems[0].Addr() {
		t.Fatalf("WaitError = %+v, want 2 wanted and the lone member seen", we)
	}
}

func TestClientWaitAliveAfterADeathReturnsOnceItsKeysMoved(t *testing.T) {
	var victim systemtest.Net
	systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
		if i == 2 {
			victim.Attach(t, cfg)
		}
	}, Counter)
	c := newClient(t, systems[0].Addr())
	ctx := systemtest.Ctx(t)
	if _, err := c.WaitAlive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	systemtest.Crash(systems[2], &victim)
	if _, err := c.WaitAlive(ctx, 2); err != nil {
		t.Fatalf("WaitAlive(2) after a crash: %v", err)
	}
	for i := range 30 {
		key := "k" + strconv.Itoa(i)
		if _, err := actor.Ask(ctx, Counter.Ref(c, key), Get{}); err != nil {
			t.Fatalf("ask %s once the client saw the death: %v", key, err)
		}
	}
}
