package system

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-go/troupe/cluster"
)

// WaitError reports a wait on the membership that ended with its context
// before the membership was as wanted. errors.Is(err, ctx.Err()) holds.
type WaitError struct {
	Alive int              // how many members alive the wait wanted
	Seen  []cluster.Member // the members as last seen
	Err   error            // the context's error
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("troupe: waiting for %d members alive: last saw %s: %v", e.Alive, describeMembers(e.Seen), e.Err)
}

func (e *WaitError) Unwrap() error { return e.Err }

// describeMembers lists members as "addr#incarnation status", the way an
// operator reads them.
func describeMembers(ms []cluster.Member) string {
	if len(ms) == 0 {
		return "no members"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.ID.String() + " " + m.Status.String()
	}
	return strings.Join(parts, ", ")
}

// membersPoll is how often WaitAlive reads the view: a fraction of the
// fastest heartbeat, so a wait ends within a few milliseconds of the view
// changing.
const membersPoll = 5 * time.Millisecond

// WaitAlive waits until s sees exactly n members alive, itself included,
// and none suspect (every other member is known dead or gone), and
// returns the members it saw then. A program starting several members
// calls it on each before serving, so that every member places keys as
// the others do; after a member died, WaitAlive(ctx, n-1) returns once
// its keys have moved. If ctx ends first it returns a *WaitError with
// the members last seen. An embedded system has no members: it waits
// only for n = 0.
func (s *System) WaitAlive(ctx context.Context, n int) ([]cluster.Member, error) {
	t := time.NewTicker(membersPoll)
	defer t.Stop()
	for {
		ms := s.Members()
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
