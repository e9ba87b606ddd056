package remote

import (
	"time"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/placement"
	"github.com/troupe-go/troupe/ring"
	"github.com/vmihailenco/msgpack/v5"
)

// Member lists between members and clients.
//
// A client syncs with the members it follows (Sync), naming the digest
// of the list it last had from that member. The member subscribes it to
// pushes for clientExpiry and answers with its list and its placement
// version; when the digest is that of its own list, it answers with its
// version and the digest alone (kindVersion), and the client takes the
// list it kept from that member as if it came again: the answer costs
// no list, yet refreshes the client as the list would (it still names
// the members that list names, and it counts as hearing from the member).
// Members push the list and the version on each view change.
//
// The digest covers the list's every byte, not the placement version: a
// status that moves no key (a suspicion, a join under way) still shows in
// the client's Members. The placement version stays placement-only, as the
// admin API reports it; a client compares it with its own only to learn
// that it is stale.
//
// A member that receives from a client a message for a key it does not
// own in its view (it forwards a tell, answers "not the owner" to an ask)
// sends that client its version and digest unasked, at most once per
// noticeEvery: a client whose own placement version differs syncs with
// that member at once, rather than at its next SyncInterval. Tokens are
// compared for equality only.
//
// Clients that sync the old way (kindSync, before versions) get lists the
// old way (kindMembers) and no notices.

// noticeEvery bounds how often a member tells one client its placement
// version unasked: a client sending a stream to keys the member does not
// own (through it as a relay, or stale) learns it once, not per message.
const noticeEvery = 100 * time.Millisecond

// subscriber is a client that synced here.
type subscriber struct {
	at time.Time // its last sync
	// versioned: it syncs with kindSyncSince, and reads kindMembersV and
	// kindVersion.
	versioned bool
}

// heardList is, on a client, the member list it last had from one
// member, and that list's digest.
type heardList struct {
	digest string
	list   []cluster.Member
}

// sentList is a view's member list as members send it.
type sentList struct {
	body   []byte // msgpack of the view's list
	digest string // listDigest(body)
}

// listDigest identifies a member list by its encoding: equal digests
// mean the same records, field for field, in the same order.
func listDigest(body []byte) string {
	return placement.Digest(append([]byte{'L'}, body...))
}

// sent returns v's member list as members send it, encoded at the first
// call: once per view, whatever the clients.
func (v *view) sent() (*sentList, error) {
	if s := v.sentList.Load(); s != nil {
		return s, nil
	}
	body, err := msgpack.Marshal(v.list)
	if err != nil {
		return nil, err
	}
	v.sentList.CompareAndSwap(nil, &sentList{body: body, digest: listDigest(body)})
	return v.sentList.Load(), nil
}

// Sync asks the member at to for its member list, and for pushes of the
// list when it changes; the answer reaches Config.OnMembers. It names
// the digest of the list it last had from to, so that an unchanged list
// is not sent again.
func (r *Router) Sync(to ring.NodeID) error {
	r.mu.Lock()
	digest := r.heard[to].digest
	r.mu.Unlock()
	return r.send(to, 0, &envelope{kind: kindSyncSince, id: r.nextID.Add(1), digest: digest}, true)
}

// PlacementVersion returns the placement version of the current view
// (see internal/placement): "" while the view holds no member list.
func (r *Router) PlacementVersion() string { return r.view.Load().placement }

// ListsDecoded returns how many member lists this node decoded: on a
// client, the pushes and the answers to its syncs that carried the list.
func (r *Router) ListsDecoded() uint64 { return r.listsDecoded.Load() }

// serveSync answers a client's sync and subscribes it to pushes. Every
// list and version goes to a client on lane 0, so they arrive in the
// order they were sent.
func (r *Router) serveSync(from ring.NodeID, e *envelope) {
	versioned := e.kind == kindSyncSince
	r.mu.Lock()
	r.clients[from] = subscriber{at: time.Now(), versioned: versioned}
	r.mu.Unlock()
	v := r.view.Load()
	s, err := v.sent()
	if err != nil {
		r.log.Warn("troupe: member list not encoded", "err", err)
		return
	}
	answer := &envelope{kind: kindMembers, id: e.id, body: s.body}
	switch {
	case !versioned:
	case e.digest != "" && e.digest == s.digest:
		answer = &envelope{kind: kindVersion, id: e.id, version: v.placement, digest: s.digest}
	default:
		answer = &envelope{kind: kindMembersV, id: e.id, version: v.placement, body: s.body}
	}
	r.send(from, 0, answer, true)
}

// push sends v's member list to the subscribed clients; one that cannot
// be sent to is unsubscribed.
func (r *Router) push(v *view, clients []ring.NodeID, versioned []bool) {
	s, err := v.sent()
	if err != nil {
		r.log.Warn("troupe: member list not encoded", "err", err)
		return
	}
	for i, c := range clients {
		e := &envelope{kind: kindMembers, body: s.body}
		if versioned[i] {
			e = &envelope{kind: kindMembersV, version: v.placement, body: s.body}
		}
		if err := r.send(c, 0, e, true); err != nil {
			r.mu.Lock()
			delete(r.clients, c)
			r.mu.Unlock()
		}
	}
}

// noticeStale sends from, a client that sent here a message for a key
// this member does not own, this member's placement version and list
// digest: its view may be stale. At most one per noticeEvery per client,
// none to a member (its view converges by gossip) nor to a client known
// to sync the old way; nothing before this member has a view.
func (r *Router) noticeStale(from ring.NodeID) {
	v := r.view.Load()
	if !r.cfg.Serve || len(v.list) == 0 {
		return
	}
	if _, member := v.status[from]; member {
		return
	}
	b := r.inboxFor(from)
	now := max(int64(time.Since(r.started)), 1) // monotonic; 0 means never
	last := b.noticed.Load()
	if (last != 0 && now-last < int64(noticeEvery)) || !b.noticed.CompareAndSwap(last, now) {
		return
	}
	r.mu.Lock()
	sub, known := r.clients[from]
	r.mu.Unlock()
	if known && !sub.versioned {
		return
	}
	s, err := v.sent()
	if err != nil {
		return
	}
	r.noticesSent.Add(1)
	r.send(from, 0, &envelope{kind: kindVersion, version: v.placement, digest: s.digest}, true)
}

// membersFrom hands a member list from a member to Config.OnMembers, and
// keeps a versioned one as the list last had from that member.
func (r *Router) membersFrom(from ring.NodeID, e *envelope) {
	var ms []cluster.Member
	if err := msgpack.Unmarshal(e.body, &ms); err != nil {
		r.log.Warn("troupe: undecodable member list", "from", from, "err", err)
		return
	}
	r.listsDecoded.Add(1)
	if e.kind == kindMembersV {
		r.mu.Lock()
		r.heard[from] = heardList{digest: listDigest(e.body), list: ms}
		r.mu.Unlock()
	}
	r.cfg.OnMembers(from, ms)
}

// versionFrom handles a member's version and digest: when the digest is
// that of the list last had from the member, that list is the member's
// still, and goes to Config.OnMembers again, as if sent; otherwise, when
// the member's placement version differs from this node's, the client
// syncs with it at once.
func (r *Router) versionFrom(from ring.NodeID, e *envelope) {
	r.mu.Lock()
	h, ok := r.heard[from]
	r.mu.Unlock()
	if ok && h.digest == e.digest {
		r.cfg.OnMembers(from, h.list)
		return
	}
	if e.version != r.PlacementVersion() {
		if err := r.Sync(from); err != nil {
			r.log.Debug("troupe: sync after a placement version", "member", from, "err", err)
		}
	}
}
