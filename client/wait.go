package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-go/troupe/cluster"
)

// WaitError reports a wait on the member list that ended with its context
// before the list was as wanted. errors.Is(err, ctx.Err()) holds.
type WaitError struct {
	Alive int              // how many members alive the wait wanted
	Seen  []cluster.Member // the member list as last learned
	Err   error            // the context's error
}

func (e *WaitError) Error() string {
	seen := "no members"
	if len(e.Seen) > 0 {
		parts := make([]string, len(e.Seen))
		for i, m := range e.Seen {
			parts[i] = m.ID.String() + " " + m.Status.String()
		}
		seen = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("troupe: waiting for %d members alive: last saw %s: %v", e.Alive, seen, e.Err)
}

func (e *WaitError) Unwrap() error { return e.Err }

// membersPoll is how often WaitAlive reads the member list, which
// changes when a member pushes it or a sync brings it.
const membersPoll = 5 * time.Millisecond

// WaitAlive waits until the client's member list holds exactly n members
// alive and none suspect (every other member is known dead or gone), and
// returns the list then: the client places keys on those n. After a
// member died, WaitAlive(ctx, n-1) returns once the client sends its keys
// to their new owners; the client learns of the death from the lists the
// members push, moments after the members themselves.
// If ctx ends first it returns a *WaitError with the list last learned.
func (c *Client) WaitAlive(ctx context.Context, n int) ([]cluster.Member, error) {
	t := time.NewTicker(membersPoll)
	defer t.Stop()
	for {
		ms := c.Members()
		if settled(ms, n) {
			return ms, nil
		}
		select {
		case <-ctx.Done():
			return nil, &WaitError{Alive: n, Seen: ms, Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// settled reports whether ms holds n members alive and none suspect.
func settled(ms []cluster.Member, n int) bool {
	alive := 0
	for _, m := range ms {
		switch m.Status {
		case cluster.StatusAlive:
			alive++
		case cluster.StatusSuspect:
			return false
		}
	}
	return alive == n
}
