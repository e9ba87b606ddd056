package system

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/internal/replicanode"
	"github.com/troupe-go/troupe/ring"
)

// collectBatch is the most keys one pass of the collector collects.
const collectBatch = 1024

// collectEvery is how often the collector looks for tombstones of age:
// an eighth of it, between 10 ms and an hour, so a tombstone is
// collected at most about an eighth past its age.
func collectEvery(age time.Duration) time.Duration {
	return min(max(age/8, 10*time.Millisecond), time.Hour)
}

// collectTombstones collects, until ctx ends, the keys of n's store that
// hold nothing but tombstones older than Config.TombstoneAge and that
// this member owns (see Config.TombstoneAge): it acquires each key as the
// runtime would, collects it (replicanode.Node.Collect) and resigns it,
// unless the runtime acquired it meanwhile. A key another member owns is
// that member's to collect.
func (s *states) collectTombstones(ctx context.Context, n *replicanode.Node) {
	t := time.NewTimer(collectEvery(s.tombstoneAge))
	defer t.Stop()
	var cursor ring.Token
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cursor = s.collectPass(ctx, n, cursor, time.Now().Add(-s.tombstoneAge)).next
		t.Reset(collectEvery(s.tombstoneAge))
	}
}

// pass is what one pass of the collector did.
type pass struct {
	next   ring.Token // where the next pass goes on from
	tried  int        // keys it tried to collect
	gaveUp bool       // it ended at a key whose acquisition timed out or sweep gave up
}

// collectPass is one pass of the collector: it collects up to
// collectBatch keys holding only tombstones deleted before before, read
// in ring order after cursor. A key whose acquisition times out, or
// whose sweep gives up, ends the pass.
func (s *states) collectPass(ctx context.Context, n *replicanode.Node, cursor ring.Token, before time.Time) pass {
	// A key of a range this member still receives: its own replica's
	// answers do not count, so a sweep would give up.
	receiving := n.Receiving()
	want := func(k replica.Key) bool {
		t := k.Token()
		return !slices.ContainsFunc(receiving, func(g ring.Range) bool { return g.Contains(t) }) && s.collects(k)
	}
	keys, next, err := n.Collectable(ctx, cursor, before, collectBatch, want)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("troupe: listing tombstones to collect", "err", err)
	}
	p := pass{next: next}
	for _, k := range keys {
		if ctx.Err() != nil {
			break
		}
		p.tried++
		if !s.collectKey(ctx, n, k, before) {
			// A replica did not answer (down, cut off, or receiving the
			// range at a hand-off): the next keys likely share it, and
			// each would wait out its resends (or the acquisition its
			// timeout). The pass ends here; the
			// next goes on after this key (starting from it, a replica
			// that never answers would hold every pass on it), which
			// the collector meets again on its next round of the ring.
			p.next, p.gaveUp = k.Token(), true
			break
		}
	}
	return p
}

// collects reports whether the collector would collect k: a durable type
// this member hosts, a key it owns (placement, or pinned here), that no
// activation holds, and whose replicas the view holds alive or suspect
// (a sweep needs every one; one of a member gone would give up after a
// few seconds, at every pass).
func (s *states) collects(k replica.Key) bool {
	if !s.owns(k) {
		return false
	}
	st := s.kinds[k.Type]
	if !st.Pinned && st.Replicas > 1 && s.replicas != nil && s.gone != nil {
		set, err := s.replicas(nil, k.Type, uint64(k.Token()), st.Replicas)
		if err != nil || slices.ContainsFunc(set, s.gone) {
			return false
		}
	}
	return true
}

// collectKey collects k, held only by tombstones deleted before before,
// if the collector still collects it (see collects). It reports false
// when the pass should end: the key's acquisition timed out, or its
// sweep gave up.
func (s *states) collectKey(ctx context.Context, n *replicanode.Node, k replica.Key, before time.Time) bool {
	if !s.collects(k) {
		return true
	}
	st := s.kinds[k.Type]
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	if err := s.acquire(ctx, k.Type, k.ID, max(st.Replicas, 1), st.Level, st.Pinned); err != nil {
		s.log.Debug("troupe: collecting a tombstone: acquire", "type", k.Type, "key", k.ID, "err", err)
		s.resignUnheld(n, k)
		// One that timed out most likely has the cause of a sweep that
		// gives up, at a higher cost: a level that needs every replica
		// (All) waits out its timeout on one that does not count. One
		// that failed at once costs nothing to the next keys.
		return !errors.Is(err, context.DeadlineExceeded)
	}
	collected, err := n.Collect(ctx, k, before)
	switch {
	case err != nil:
		s.log.Debug("troupe: collecting a tombstone", "type", k.Type, "key", k.ID, "err", err)
	case collected:
		s.collected.Add(1)
	}
	s.resignUnheld(n, k)
	return !errors.Is(err, replicanode.ErrSweepGaveUp)
}

// collectTimeout bounds the collection of one key.
const collectTimeout = 30 * time.Second

// resignUnheld resigns k, which the collector acquired, unless the
// runtime acquired it since: under mu, so that a later acquisition by the
// runtime reaches the node after the resignation.
func (s *states) resignUnheld(n *replicanode.Node, k replica.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held[k] {
		_ = n.Resign(k)
	}
}
