package remote

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/placement"
	"github.com/troupe-go/troupe/ring"
)

// view is one immutable snapshot of the cluster as placement sees it.
type view struct {
	self   ring.NodeID // zero for a client
	owning bool        // this node may own non-pinned keys
	status map[ring.NodeID]cluster.Status
	// joining holds the members still joining: in the member set, not
	// yet in the rings.
	joining map[ring.NodeID]bool
	byAddr  map[string]ring.NodeID // the newest process in the rings at each address
	rings   map[string]*typeRing   // by actor type
	list    []cluster.Member
	// placement is the placement version of the rings (see
	// internal/placement): computed once per view; "" with no list.
	placement string
	// sentList is the list as members send it to clients (see sent).
	sentList atomic.Pointer[sentList]
}

// typeRing places the keys of the actor types hosted by one member set.
type typeRing struct {
	r    *ring.Ring
	live ring.Liveness // nil when every member of r serves: the usual case, and no lookups
	// owners caches recent placements by token, so that a stream of
	// messages to a few keys does not search the ring for each one. It
	// lives as long as the view: a new view starts empty.
	owners [ownerCache]atomic.Pointer[owned]
}

// ownerCache is the number of placements a typeRing remembers (direct
// mapped by token: tokens are hashes).
const ownerCache = 256

// owned is one cached placement: the owner of token among n replicas.
type owned struct {
	tok uint64
	n   int
	id  ring.NodeID
}

// owner returns the owner of tok among its first n replicas.
func (tr *typeRing) owner(tok uint64, n int) (ring.NodeID, error) {
	slot := &tr.owners[tok%ownerCache]
	if o := slot.Load(); o != nil && o.tok == tok && o.n == n {
		return o.id, nil
	}
	id, err := tr.r.Owner(ring.Token(tok), n, tr.live)
	if err != nil {
		return ring.NodeID{}, err
	}
	slot.Store(&owned{tok: tok, n: n, id: id})
	return id, nil
}

// serves reports whether a member in status s takes new work: alive or
// merely suspected. A leaving member hands its keys over; a dead one waits
// in the ring, skipped, until a majority removes it.
func serves(s cluster.Status) bool { return s == cluster.StatusAlive || s == cluster.StatusSuspect }

func newView(self ring.NodeID, owning bool, members []cluster.Member) *view {
	v := &view{self: self, owning: owning, status: map[ring.NodeID]cluster.Status{}, joining: map[ring.NodeID]bool{},
		byAddr: map[string]ring.NodeID{}, rings: map[string]*typeRing{}, list: members}
	hosts := map[string][]ring.NodeID{}
	for _, m := range members {
		id := m.ID
		v.status[id] = m.Status
		if m.Joining {
			v.joining[id] = true
		}
		if m.Status == cluster.StatusLeft || m.Joining {
			// A member still joining has no view to place keys with yet:
			// nothing is routed to it until its record says it is ready.
			continue
		}
		if m.Status == cluster.StatusLeaving {
			// A leaving member hands its keys and its copies over: the
			// ring, replica sets included, is the one without it, and
			// the one with it is the previous ring its successors
			// acquire and catch up from while it still answers.
			continue
		}
		// internal/adminapi's pinnedAt mirrors this choice for the admin
		// API's where: change both together.
		if cur, ok := v.byAddr[id.Addr]; !ok || cur.Incarnation < id.Incarnation {
			v.byAddr[id.Addr] = id
		}
		for _, t := range m.ActorTypes {
			hosts[t] = append(hosts[t], id)
		}
	}
	live := func(m ring.NodeID) bool { return serves(v.status[m]) }
	// Types hosted by the same members share one ring.
	shared := map[string]*typeRing{}
	for t, ms := range hosts {
		slices.SortFunc(ms, ring.NodeID.Compare)
		var sig strings.Builder
		for _, m := range ms {
			sig.WriteString(m.String())
			sig.WriteByte(' ')
		}
		tr, ok := shared[sig.String()]
		if !ok {
			tr = &typeRing{r: ring.New(ms)}
			for _, m := range ms {
				if !serves(v.status[m]) {
					tr.live = live
					break
				}
			}
			shared[sig.String()] = tr
		}
		v.rings[t] = tr
	}
	if len(members) > 0 {
		full := make(map[string]*ring.Ring, len(v.rings))
		for t, tr := range v.rings {
			full[t] = tr.r
		}
		v.placement = placement.Version(full, live)
	}
	return v
}

// dest returns the member that serves typ/key now, and whether it is this
// node. k is the local runtime of typ.
func (v *view) dest(k host.RemoteKind, typ, key string, tok uint64) (ring.NodeID, bool, error) {
	if k != nil && k.Pinned() {
		addr, _, ok := strings.Cut(key, "/")
		if !ok || addr == "" {
			return ring.NodeID{}, false, fmt.Errorf("%w: pinned key %q names no member (take it with RefAt)", fault.ErrInvalidRef, key)
		}
		if addr == v.self.Addr {
			return v.self, true, nil
		}
		id, ok := v.byAddr[addr]
		if !ok || !serves(v.status[id]) {
			return ring.NodeID{}, false, fmt.Errorf("%w: %s/%s: member %s is not up", fault.ErrUnavailable, typ, key, addr)
		}
		return id, false, nil
	}
	if len(v.list) == 0 {
		return ring.NodeID{}, false, fmt.Errorf("%w: %s/%s: not joined to a cluster yet", fault.ErrUnavailable, typ, key)
	}
	tr := v.rings[typ]
	if tr == nil {
		return ring.NodeID{}, false, fmt.Errorf("%w: no member hosts %q", fault.ErrUnknownActor, typ)
	}
	n := tr.r.Len()
	if k != nil && k.Replicas() > 1 {
		n = k.Replicas()
	}
	id, err := tr.owner(tok, n)
	if err != nil {
		return ring.NodeID{}, false, fmt.Errorf("%w: %s/%s: %w", fault.ErrUnavailable, typ, key, err)
	}
	if id != v.self {
		return id, false, nil
	}
	if !v.owning {
		return ring.NodeID{}, false, fmt.Errorf("%w: %s/%s: this node lost the majority of the cluster", fault.ErrUnavailable, typ, key)
	}
	return id, true, nil
}

// owner is dest for a key that is not pinned, without the error: ok is
// false where dest fails. Hand-off asks it about every message for a
// while after a view change, where an error built each time cost two
// allocations per message.
func (v *view) owner(k host.RemoteKind, typ string, tok uint64) (id ring.NodeID, ok bool) {
	tr := v.rings[typ]
	if len(v.list) == 0 || tr == nil {
		return ring.NodeID{}, false
	}
	n := tr.r.Len()
	if k != nil && k.Replicas() > 1 {
		n = k.Replicas()
	}
	id, err := tr.owner(tok, n)
	if err != nil || (id == v.self && !v.owning) {
		return ring.NodeID{}, false
	}
	return id, true
}

// gone reports whether id no longer serves anything: dead or left. A
// node the view does not know (named by another member's newer view) is
// not known to be gone.
func (v *view) gone(id ring.NodeID) bool {
	s, ok := v.status[id]
	return ok && (s == cluster.StatusDead || s == cluster.StatusLeft)
}

// statusOr returns id's status, or def when the view does not know id.
func (v *view) statusOr(id ring.NodeID, def cluster.Status) cluster.Status {
	if s, ok := v.status[id]; ok {
		return s
	}
	return def
}

// Replicas appends to dst the replica set of typ's key at tok: the first
// n distinct members clockwise on the type's full ring, dead members
// included (a partition cannot shrink a quorum) and leaving ones not
// (they hand over), fewer when the ring has fewer members. It fails when no member hosts typ or this node has no
// view yet.
func (r *Router) Replicas(dst []ring.NodeID, typ string, tok uint64, n int) ([]ring.NodeID, error) {
	v := r.view.Load()
	if len(v.list) == 0 || v.rings[typ] == nil {
		return dst, fmt.Errorf("%w: %s: no ring places it here yet", fault.ErrUnavailable, typ)
	}
	return v.replicas(dst, typ, tok, n), nil
}

// PreviousReplicas appends to dst the replica set of typ's key at tok on
// typ's ring before its latest change (ok false when it had none): the
// set a new owner acquires from besides its own, so that an owner still
// writing to the old set is fenced and what the old set's quorum holds is
// adopted. It is kept until the type's ring changes again, not for a
// window: a key first used long after the change must still adopt what
// its old set acknowledged.
func (r *Router) PreviousReplicas(dst []ring.NodeID, typ string, tok uint64, n int) (_ []ring.NodeID, ok bool) {
	prev := r.prevRings.Load()
	if prev == nil || (*prev)[typ] == nil {
		return dst, false
	}
	pr := (*prev)[typ]
	return pr.AppendReplicas(dst, ring.Token(tok), min(n, pr.Len())), true
}

// notePrevRings keeps, for each type whose ring differs between old and
// v, old's ring as its previous one.
func (r *Router) notePrevRings(old, v *view) {
	var next map[string]*ring.Ring
	if p := r.prevRings.Load(); p != nil {
		next = maps.Clone(*p)
	} else {
		next = map[string]*ring.Ring{}
	}
	changed := false
	for typ, tr := range v.rings {
		ot := old.rings[typ]
		if ot == nil || ot.r.Version() == tr.r.Version() {
			continue
		}
		next[typ], changed = ot.r, true
	}
	if changed {
		r.prevRings.Store(&next)
	}
}

// Ring returns typ's full ring in the current view (dead members
// included), or nil when no member hosts it.
func (r *Router) Ring(typ string) *ring.Ring {
	if tr := r.view.Load().rings[typ]; tr != nil {
		return tr.r
	}
	return nil
}

// Snapshot returns, from one view so that a report built from them is
// consistent: this node's identity in it, whether it may own keys (false
// while it lost the majority), the member list, and the full ring of each
// type (dead members included). The caller must not modify them.
func (r *Router) Snapshot() (self ring.NodeID, owning bool, members []cluster.Member, rings map[string]*ring.Ring) {
	v := r.view.Load()
	rings = make(map[string]*ring.Ring, len(v.rings))
	for typ, tr := range v.rings {
		rings[typ] = tr.r
	}
	return v.self, v.owning, v.list, rings
}

// Status returns id's status in the current view; ok is false when the
// view does not hold id (never known, or removed).
func (r *Router) Status(id ring.NodeID) (_ cluster.Status, ok bool) {
	st, ok := r.view.Load().status[id]
	return st, ok
}

// Entered reports whether the current view shows id's entry into the
// rings: it holds id past its joining, whatever its status since (left
// included, until its record is forgotten), or a newer process in the
// rings at id's address (which entered after id did).
func (r *Router) Entered(id ring.NodeID) bool { return r.view.Load().entered(id) }

// ViewNow returns Entered and Departed over the current view, which later
// changes of the view do not affect.
func (r *Router) ViewNow() (entered, departed func(ring.NodeID) bool) {
	v := r.view.Load()
	return v.entered, v.departed
}

func (v *view) entered(id ring.NodeID) bool {
	if st, ok := v.status[id]; ok && (!v.joining[id] || st == cluster.StatusLeft) {
		return true
	}
	cur, ok := v.byAddr[id.Addr]
	return ok && cur.Incarnation > id.Incarnation
}

// Departed reports whether the current view shows id gone from the rings
// for good: it holds id leaving or left, or a newer process in the rings
// at its address, or does not hold id at all (removed, or never known).
// No ring of the view holds it, whatever the type, and none will: a
// process that comes back does so as a new incarnation. (A member held
// alive, suspect, dead or still joining has not departed, whether or not
// a type's ring holds it.)
func (r *Router) Departed(id ring.NodeID) bool { return r.view.Load().departed(id) }

func (v *view) departed(id ring.NodeID) bool {
	if cur, ok := v.byAddr[id.Addr]; ok && cur.Incarnation > id.Incarnation {
		return true
	}
	st, ok := v.status[id]
	return !ok || st == cluster.StatusLeft || st == cluster.StatusLeaving
}

// Gone reports whether the current view holds id dead or left.
func (r *Router) Gone(id ring.NodeID) bool { return r.view.Load().gone(id) }

// replicas is Router.Replicas under v, for a type v has a ring of.
func (v *view) replicas(dst []ring.NodeID, typ string, tok uint64, n int) []ring.NodeID {
	tr := v.rings[typ]
	return tr.r.AppendReplicas(dst, ring.Token(tok), min(n, tr.r.Len()))
}
