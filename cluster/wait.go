package cluster

import (
	"fmt"
	"strings"
)

// WaitError reports a wait on the membership (System.WaitAlive,
// Client.WaitAlive) that ended with its context before the members were
// as wanted. errors.Is(err, ctx.Err()) holds.
type WaitError struct {
	Alive int      // how many members alive the wait wanted
	Seen  []Member // the members as last seen
	Err   error    // the context's error
}

func (e *WaitError) Error() string {
	seen := "no members"
	if len(e.Seen) > 0 {
		parts := make([]string, len(e.Seen))
		for i, m := range e.Seen {
			parts[i] = m.ID.String() + " " + m.Status.String()
			if m.Joining {
				parts[i] += " (joining)"
			}
		}
		seen = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("troupe: waiting for %d members alive: last saw %s: %v", e.Alive, seen, e.Err)
}

func (e *WaitError) Unwrap() error { return e.Err }
