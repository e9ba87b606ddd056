package membership

import (
	"errors"
	"slices"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/wire"
)

// The causes of a failed join, shared with the client.
var (
	ErrJoinTimeout = cluster.ErrJoinTimeout
	ErrJoinRefused = cluster.ErrJoinRefused
)

// JoinFailure builds the error of a join through seeds that ended with
// cause, naming what each seed last did (dr may be nil).
func JoinFailure(cause error, seeds []string, dr DialReporter) *cluster.JoinError {
	e := &cluster.JoinError{Err: cause}
	for _, s := range seeds {
		var err error
		if dr != nil {
			err = dr.DialError(s)
		}
		e.Seeds = append(e.Seeds, cluster.SeedError{Seed: s, Err: err})
	}
	return e
}

// AllRefused reports whether every seed refused the handshake for good:
// the join cannot succeed until the configuration changes. A handshake
// that timed out is not a refusal.
func AllRefused(seeds []string, dr DialReporter) bool {
	if dr == nil || len(seeds) == 0 {
		return false
	}
	for _, s := range seeds {
		var r *wire.Refused
		if err := dr.DialError(s); !errors.As(err, &r) || r.Reason == wire.RefusedTimeout {
			return false
		}
	}
	return true
}

// Current returns the members of records as users see them: for each
// address, the record of its newest process, unless that process left.
// Records of older processes at an address, and tombstones, are history.
// The result is sorted by NodeID.
func Current(records []cluster.Member) []cluster.Member {
	newest := make(map[string]int, len(records))
	for i, m := range records {
		if j, ok := newest[m.ID.Addr]; !ok || records[j].ID.Incarnation < m.ID.Incarnation {
			newest[m.ID.Addr] = i
		}
	}
	out := make([]cluster.Member, 0, len(newest))
	for _, i := range newest {
		if records[i].Status != cluster.StatusLeft {
			out = append(out, records[i].Clone())
		}
	}
	slices.SortFunc(out, func(a, b cluster.Member) int { return a.ID.Compare(b.ID) })
	return out
}
