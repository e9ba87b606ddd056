package remote

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/ring"
)

// route places the keys of one actor type hosted here. The actor runtime
// keeps the route of its type (host.Route) and receiving keeps the last
// one it used, so a stream of messages looks up neither the type by name
// nor, for the keys it saw last, the ring (typeRing.owner caches those).
type route struct {
	r   *Router
	typ string
	k   host.RemoteKind
	cur atomic.Pointer[routeView]
	// out is the outbox of the last tell sent, looked at first.
	out atomic.Pointer[outbox]
}

// routeView is what a route needs from one view: the type's ring and how
// many replicas to walk, or nil tr when dest must take the general path
// (pinned keys, no ring, not joined).
type routeView struct {
	v  *view
	tr *typeRing
	n  int
}

var _ host.Route = (*route)(nil)

// Route implements host.Remote.
func (r *Router) Route(k host.RemoteKind) host.Route {
	rt, _ := r.routes.LoadOrStore(k.Name(), &route{r: r, typ: k.Name(), k: k})
	return rt.(*route)
}

// routeOf returns the route of typ, or nil when no kind of that name
// accepts remote messages here.
func (r *Router) routeOf(typ string) *route {
	if rt, ok := r.routes.Load(typ); ok {
		return rt.(*route)
	}
	k := r.kind(typ)
	if k == nil {
		return nil
	}
	return r.Route(k).(*route)
}

// dest is view.dest for the route's type under the current view.
func (rt *route) dest(key string, tok uint64) (ring.NodeID, bool, error) {
	v := rt.r.view.Load()
	c := rt.cur.Load()
	if c == nil || c.v != v {
		c = &routeView{v: v}
		if tr := v.rings[rt.typ]; tr != nil && !rt.k.Pinned() && len(v.list) > 0 {
			c.tr, c.n = tr, tr.r.Len()
			if n := rt.k.Replicas(); n > 1 {
				c.n = n
			}
		}
		rt.cur.Store(c)
	}
	if c.tr == nil {
		return v.dest(rt.k, rt.typ, key, tok)
	}
	id, err := c.tr.owner(tok, c.n)
	if err != nil || (id == v.self && !v.owning) {
		return v.dest(rt.k, rt.typ, key, tok) // for its error
	}
	return id, id == v.self, nil
}

// Here implements host.Route. A key held while its previous owner drains
// it (see handoff.go) is not here: its messages go through the router.
func (rt *route) Here(key string, tok uint64) (bool, error) {
	_, here, err := rt.dest(key, tok)
	if here && err == nil && rt.r.mustHold(rt.k, rt.typ, key, tok) {
		return false, nil
	}
	return here, err
}

// Tell implements host.Route.
func (rt *route) Tell(ctx context.Context, out host.Outbound) error {
	to, here, err := rt.dest(out.Key, out.Token)
	if err != nil {
		return err
	}
	return rt.tellTo(to, here, &out)
}

// Owns implements host.Route.
func (rt *route) Owns(key string, tok uint64) (bool, error) {
	_, here, err := rt.dest(key, tok)
	return here && err == nil, err
}

// HoldWake implements host.Route.
func (rt *route) HoldWake(key string, tok uint64, wake func(owned bool)) bool {
	if owned, _ := rt.Owns(key, tok); !owned {
		return false
	}
	prev, maybe := rt.r.mayDrainFrom(rt.k, rt.typ, key, tok)
	if !maybe {
		return false
	}
	// Released, the key may have moved on meanwhile: wake is told.
	return rt.r.holdItem(prev, ring.NodeID{}, &envelope{typ: rt.typ, key: key, token: tok}, func(closed bool) {
		owned, _ := rt.Owns(key, tok)
		wake(owned && !closed)
	})
}

// TellOrHere implements host.Route.
func (rt *route) TellOrHere(ctx context.Context, key string, tok uint64, name string, enc host.MessageAppender, m any) (bool, error) {
	to, here, err := rt.dest(key, tok)
	if err != nil {
		return false, err
	}
	if here && !rt.r.mustHold(rt.k, rt.typ, key, tok) {
		return true, nil
	}
	return false, rt.tellTo(to, here, &host.Outbound{Type: rt.typ, Key: key, Token: tok, Name: name, Enc: enc, Msg: m})
}

// tellTo sends out to to, the owner of its key (this node when here).
func (rt *route) tellTo(to ring.NodeID, here bool, out *host.Outbound) error {
	if here || rt.r.isSilent(to) {
		enc := out.Encoded()
		if limit := rt.r.maxMessage(); limit > 0 && len(enc.Body) > limit {
			return fmt.Errorf("%w: %s/%s: message of %d bytes, limit %d", fault.ErrMessageTooLarge, enc.Type, enc.Key, len(enc.Body), limit)
		}
		return rt.r.tellTo(to, here, enc) // holds, or relays (see relay.go)
	}
	o := rt.out.Load()
	if o == nil || o.to != to || o.epoch != rt.r.epoch.Load() || o.dropped.Load() {
		o = rt.r.outboxFor(to)
		rt.out.Store(o)
	}
	e := envelope{kind: kindTell, token: out.Token, typ: out.Type, key: out.Key, name: out.Name, body: out.Body, trace: out.Trace}
	return o.enqueueBody(out.Token, &e, out.Enc, out.Msg, false, unsent{})
}
