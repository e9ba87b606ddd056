package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/client"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// deathBound is how soon after a crash the client must see the member
// dead and fail the ask waiting on it. The members' verdict takes about a
// second with the fast timings; the rest is slack for -race on a loaded
// machine. The client's SyncInterval and AskTimeout are far longer, so
// only the members' pushes meet it.
const deathBound = 4 * time.Second

// TestClientSeesACrashedMemberDeadWithinABound crashes the owner of a key
// while the client waits on an ask there, whether or not that member is
// the client's seed.
func TestClientSeesACrashedMemberDeadWithinABound(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed int // systems[2] crashes
	}{{"seed survives", 0}, {"seed crashes", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			var victim systemtest.Net
			systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
				if i == 2 {
					victim.Attach(t, cfg)
				}
			}, Counter)
			c, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test",
				Seeds: []string{systems[tc.seed].Addr()}, SyncInterval: 30 * time.Second, AskTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.WaitAlive(systemtest.Ctx(t), 3); err != nil {
				t.Fatal(err)
			}
			key := keyServedBy(t, c, systems[2])
			id := fmt.Sprintf("%s#%d", t.Name(), holdSeq.Add(1))
			errc := make(chan error, 1)
			go func() {
				_, err := actor.Ask(context.Background(), Counter.Ref(c, key), Hold{ID: id})
				errc <- err
			}()
			systemtest.Recv(t, holdingCh(id), "the ask to run on the member about to crash")

			crashed := systems[2].Addr()
			deadline := time.Now().Add(deathBound)
			systemtest.Crash(systems[2], &victim)
			select {
			case err := <-errc:
				if !errors.Is(err, actor.ErrUnavailable) {
					t.Fatalf("the ask waiting on the crashed owner failed with %v, want ErrUnavailable", err)
				}
			case <-time.After(time.Until(deadline)):
				t.Fatalf("the ask waiting on the crashed owner still waits %v after the crash; the client sees %v", deathBound, c.Members())
			}
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			ms, err := c.WaitAlive(ctx, 2)
			if err != nil {
				t.Fatalf("the client does not see the 2 survivors alive and none suspect within %v of the crash: %v", deathBound, err)
			}
			for _, m := range ms {
				if m.ID.Addr == crashed && m.Status != cluster.StatusDead {
					t.Fatalf("the client sees the crashed member %v, want dead", m.Status)
				}
			}
		})
	}
}

// keyServedBy returns a key that s serves, as the client places it: one
// whose first ask activates it on s.
func keyServedBy(t *testing.T, c *client.Client, s *system.System) string {
	t.Helper()
	for i := range 1000 {
		key := fmt.Sprintf("%s-k%d", t.Name(), i)
		before := s.Stats().Active
		if _, err := actor.Ask(systemtest.Ctx(t), Counter.Ref(c, key), Get{}); err != nil {
			t.Fatal(err)
		}
		if s.Stats().Active > before {
			return key
		}
	}
	t.Fatalf("none of 1000 keys is served by %s", s.Addr())
	return ""
}
