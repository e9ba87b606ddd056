package system

import (
	"context"

	"github.com/troupe-go/troupe/internal/adminapi"
	"github.com/troupe-go/troupe/internal/host"
)

// apiSource is what the admin API reads of a system: identity and
// readiness, the router's view (one snapshot: self, members and rings
// agree), the hosted types' definitions (read once: they do not change)
// and per type what the runtime counts anyway. Nothing of it touches the
// message path.
type apiSource struct {
	s    *System
	node adminapi.Node         // read once
	defs []adminapi.Definition // read once
}

var _ adminapi.Source = (*apiSource)(nil)

func newAPISource(s *System, version string) *apiSource {
	a := &apiSource{s: s, node: adminapi.Node{Started: s.started, BuildVersion: version, Role: RecordRole}}
	if s.m != nil {
		a.node.Addr = s.m.cfg.Advertise
	}
	for _, k := range s.h.Kinds() {
		d := adminapi.Definition{Name: k.Name(), Replicas: 1}
		if rk, ok := k.(host.RemoteKind); ok {
			d.Replicas, d.Pinned = max(rk.Replicas(), 1), rk.Pinned()
		}
		a.defs = append(a.defs, d)
	}
	return a
}

func (a *apiSource) Node() adminapi.Node { return a.node }

func (a *apiSource) Readiness() (bool, []adminapi.Check) {
	r := a.s.Readiness()
	checks := make([]adminapi.Check, 0, len(r.Checks))
	for _, c := range r.Checks {
		checks = append(checks, adminapi.Check{Name: c.Name, OK: c.OK, Cause: string(c.Cause), Reason: c.Reason})
	}
	return r.Ready, checks
}

func (a *apiSource) View() (adminapi.View, bool) {
	if a.s.m == nil {
		return adminapi.View{}, false
	}
	self, owning, records, rings := a.s.m.router.Snapshot()
	return adminapi.View{Self: self, Owning: owning, Records: records, Rings: rings}, true
}

func (a *apiSource) Definitions() []adminapi.Definition { return a.defs }

func (a *apiSource) Counts() []adminapi.Count {
	kinds := a.s.h.Kinds()
	cs := make([]adminapi.Count, 0, len(kinds))
	for _, k := range kinds {
		cs = append(cs, adminapi.Count{Name: k.Name(), Queued: k.Queued(), Activations: k.Activations()})
	}
	return cs
}

func (a *apiSource) Records(ctx context.Context) (adminapi.Records, bool, error) {
	if a.s.m == nil {
		return adminapi.Records{}, false, nil
	}
	p := a.s.m.rec
	snap, err := p.snapshot(ctx)
	if err != nil {
		return adminapi.Records{}, true, err
	}
	return adminapi.Records{Snapshot: snap, Timings: p.timings, Self: p.key(), Derived: !p.external}, true, nil
}
