package membership

import (
	"context"
	"time"

	"github.com/troupe-go/troupe/cluster"
)

// waitPoll is how often WaitAlive reads the members: a fraction of the
// fastest heartbeat, so a wait ends within a few milliseconds of the view
// changing.
const waitPoll = 5 * time.Millisecond

// WaitAlive waits until members() holds exactly n members alive and none
// suspect, and returns them; if ctx ends first it returns a
// *cluster.WaitError with the members last seen. System.WaitAlive and
// Client.WaitAlive are this over their own views.
func WaitAlive(ctx context.Context, n int, members func() []cluster.Member) ([]cluster.Member, error) {
	t := time.NewTicker(waitPoll)
	defer t.Stop()
	for {
		ms := members()
		if settled(ms, n) {
			return ms, nil
		}
		select {
		case <-ctx.Done():
			return nil, &cluster.WaitError{Alive: n, Seen: ms, Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// settled reports whether ms holds n members alive and none suspect or
// still joining.
func settled(ms []cluster.Member, n int) bool {
	alive := 0
	for _, m := range ms {
		switch m.Status {
		case cluster.StatusAlive:
			if m.Joining {
				return false // not placed on yet: about to change
			}
			alive++
		case cluster.StatusSuspect:
			return false
		}
	}
	return alive == n
}
