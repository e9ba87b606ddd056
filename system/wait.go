package system

import (
	"context"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/membership"
)

// WaitAlive waits until s sees exactly n members alive, itself included,
// and none suspect (every other member is known dead or gone), and
// returns the members it saw then. A program starting several members
// calls it on each before serving, so that every member places keys as
// the others do; after a member died, WaitAlive(ctx, n-1) returns once
// its keys have moved. If ctx ends first it returns a *cluster.WaitError with
// the members last seen. An embedded system has no members: it waits
// only for n = 0.
func (s *System) WaitAlive(ctx context.Context, n int) ([]cluster.Member, error) {
	return membership.WaitAlive(ctx, n, s.Members)
}
