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
// dead, and fail the asks waiting on it: the members' verdict takes about
// a second with the fast timings; the rest is slack for -race on a
// loaded machine. The client's SyncInterval and AskTimeout are far
// longer, so only a push, and the router failing the ask, meet it.
const deathBound = 4 * time.Second

func TestClientSeesACrashedMemberDeadAndFailsItsAsksSoon(t *testing.T) {
	for _, seed := range []int{0, 2} {
		t.Run(fmt.Sprintf("seed=member%d", seed), func(t *testing.T) {
			var victim systemtest.Net
			systems := systemtest.StartCluster(t, 3, func(i int, cfg *system.Config) {
				if i == 2 {
					victim.Attach(t, cfg)
				}
			}, Counter)
			c, err := client.New(systemtest.Ctx(t), client.Config{ClusterName: "test",
				Seeds: []string{systems[seed].Addr()}, SyncInterval: time.Minute, AskTimeout: 30 * time.Second})
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
			systemtest.Recv(t, holdingCh(id), "the held ask to run on the victim")
			crashed := systems[2].Addr()
			start := time.Now()
			systemtest.Crash(systems[2], &victim)
			select {
			case err := <-errc:
				if !errors.Is(err, actor.ErrUnavailable) {
					t.Fatalf("the ask waiting on the crashed owner failed with %v, want ErrUnavailable", err)
				}
				t.Logf("ask failed after %v", time.Since(start))
			case <-time.After(deathBound):
				t.Fatalf("the ask waiting on the crashed owner still waits %v after the crash (members: %v)", deathBound, c.Members())
			}
			for {
				dead := false
				for _, m := range c.Members() {
					if m.ID.Addr == crashed && m.Status == cluster.StatusDead {
						dead = true
					}
				}
				if dead {
					t.Logf("dead after %v", time.Since(start))
					break
				}
				if time.Since(start) > deathBound {
					t.Fatalf("the client's view %v names the crashed %s, want it dead within %v", c.Members(), crashed, deathBound)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// keyServedBy returns a key that s serves, as the client places it: the
// one whose first ask activates it on s.
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
	t.Fatalf("no key of 1000 on %s", s.Addr())
	return ""
}
