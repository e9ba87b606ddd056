package client

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/systemtest"
)

// Each sync is answered, and counts as hearing from the member (the loop
// replaces followed members that fall silent), but a member whose list
// is the one the client last had from it answers without the list.
func TestASteadyClustersAnswersToSyncsCountButCarryNoList(t *testing.T) {
	systems := systemtest.StartCluster(t, 3, nil)
	c, err := New(systemtest.Ctx(t), Config{ClusterName: "test", Seeds: []string{systems[0].Addr()}, SyncInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	if _, err := c.WaitAlive(systemtest.Ctx(t), 3); err != nil {
		t.Fatal(err)
	}
	heard := func() uint64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.lists
	}
	h0, d0 := heard(), c.router.ListsDecoded()
	systemtest.WaitUntil(t, "30 more answers heard", func() bool { return heard() >= h0+30 })
	h, d := heard()-h0, c.router.ListsDecoded()-d0
	// A membership change meanwhile (a suspicion under load) brings a
	// list from each member the client follows; without the short answer
	// every answer is a list.
	if d*5 > h {
		t.Fatalf("the client heard %d answers and decoded %d lists: want at most one list per five answers in a steady cluster", h, d)
	}
	if v := c.PlacementVersion(); v == "" {
		t.Fatal("the client has no placement version after learning the cluster")
	}
}
