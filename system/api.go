package system

import (
	"github.com/troupe-go/troupe/internal/adminapi"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/ring"
)

// apiSource is what the admin API reads of a system: identity and
// readiness, the router's view (one snapshot: members and rings agree),
// and per type what the runtime counts anyway. Nothing of it touches the
// message path.
type apiSource struct {
	s       *System
	version string // the module's, read once
}

var _ adminapi.Source = apiSource{}

func (a apiSource) Node() adminapi.Node {
	r := a.s.Readiness()
	n := adminapi.Node{Started: a.s.started, BuildVersion: a.version, Ready: r.Ready,
		Checks: make([]adminapi.Check, 0, len(r.Checks))}
	for _, c := range r.Checks {
		n.Checks = append(n.Checks, adminapi.Check{Name: c.Name, OK: c.OK, Reason: c.Reason})
	}
	if m := a.s.m; m != nil {
		// Before the first incarnation joins, the address alone.
		n.ID = ring.NodeID{Addr: m.cfg.Advertise}
		if inc := m.cur.Load(); inc != nil {
			n.ID = inc.node.ID()
		}
	}
	return n
}

func (a apiSource) View() (adminapi.View, bool) {
	if a.s.m == nil {
		return adminapi.View{}, false
	}
	_, records, rings := a.s.m.router.Snapshot()
	return adminapi.View{Records: records, Rings: rings}, true
}

func (a apiSource) Types() []adminapi.Type {
	kinds := a.s.h.Kinds()
	ts := make([]adminapi.Type, 0, len(kinds))
	for _, k := range kinds {
		t := adminapi.Type{Name: k.Name(), Queued: k.Queued(), Replicas: 1}
		if c, ok := k.(host.ActivationCounter); ok {
			t.Activations = c.Activations()
		}
		if rk, ok := k.(host.RemoteKind); ok {
			t.Replicas, t.Pinned = max(rk.Replicas(), 1), rk.Pinned()
		}
		ts = append(ts, t)
	}
	return ts
}
