package system

import (
	"context"
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
		before := time.Now().Add(-s.tombstoneAge)
		keys, next, err := n.Collectable(ctx, cursor, before, collectBatch, s.collects)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("troupe: listing tombstones to collect", "err", err)
		}
		cursor = next
		for _, k := range keys {
			if ctx.Err() != nil {
				return
			}
			s.collectKey(ctx, n, k, before)
		}
		t.Reset(collectEvery(s.tombstoneAge))
	}
}

// collects reports whether the collector would collect k: a durable type
// this member hosts, a key it owns (placement, or pinned here), that no
// activation holds, and whose replicas the view holds alive or suspect
// (a sweep needs every one; one of a member gone would give up after a
// few seconds, at every pass).
func (s *states) collects(k replica.Key) bool {
	st, ok := s.kinds[k.Type]
	if !ok {
		return false
	}
	if !st.Pinned && s.placed != nil && !s.placed(k.Type, k.ID) {
		return false
	}
	if !st.Pinned && st.Replicas > 1 && s.replicas != nil && s.gone != nil {
		set, err := s.replicas(nil, k.Type, uint64(k.Token()), st.Replicas)
		if err != nil || slices.ContainsFunc(set, s.gone) {
			return false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.held[k]
}

// collectKey collects k, held only by tombstones deleted before before,
// if the collector still collects it (see collects).
func (s *states) collectKey(ctx context.Context, n *replicanode.Node, k replica.Key, before time.Time) {
	if !s.collects(k) {
		return
	}
	st := s.kinds[k.Type]
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	if err := s.acquire(ctx, k.Type, k.ID, max(st.Replicas, 1), st.Level, st.Pinned); err != nil {
		s.log.Debug("troupe: collecting a tombstone: acquire", "type", k.Type, "key", k.ID, "err", err)
		s.resignUnheld(n, k)
		return
	}
	collected, err := n.Collect(ctx, k, before)
	switch {
	case err != nil:
		s.log.Debug("troupe: collecting a tombstone", "type", k.Type, "key", k.ID, "err", err)
	case collected:
		s.collected.Add(1)
	}
	s.resignUnheld(n, k)
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
