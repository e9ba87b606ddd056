package client

import (
	"context"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/membership"
)

// WaitAlive waits until the client's member list holds exactly n members
// alive and none suspect (every other member is known dead or gone), and
// returns the list then: the client places keys on those n. After a
// member died, WaitAlive(ctx, n-1) returns once the client sends its keys
// to their new owners; the client learns of the death from the lists the
// members push, moments after the members themselves.
// If ctx ends first it returns a *cluster.WaitError with the list last learned.
func (c *Client) WaitAlive(ctx context.Context, n int) ([]cluster.Member, error) {
	return membership.WaitAlive(ctx, n, c.Members)
}
