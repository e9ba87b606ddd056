package transport

import "sync"

// Holder is implemented by an Endpoint that can gather the envelopes
// several sends post into fewer system calls (*Transport).
type Holder interface {
	// Hold defers the inline writes of sends until release is called:
	// a sender that is about to post many envelopes (the replies and
	// replication envelopes of one batch) holds, posts, and releases,
	// and each peer's envelopes leave in one write instead of one each.
	// While any hold is open, every sender's small envelopes wait for
	// the next release, whoever calls it; release must therefore come
	// soon, without blocking in between. Holds may overlap; call release
	// exactly once per Hold.
	Hold() (release func())
}

var _ Holder = (*Transport)(nil)

// holds are the open holds of a transport and the sessions whose inline
// writes wait for a release.
type holds struct {
	mu      sync.Mutex
	open    int
	waiting []*session // each once: session.holdWaits marks it
}

// Hold defers inline writes until release; see Holder.
func (t *Transport) Hold() (release func()) {
	t.holds.mu.Lock()
	t.holds.open++
	t.holds.mu.Unlock()
	t.holding.Add(1)
	return func() {
		t.holding.Add(-1)
		t.holds.mu.Lock()
		t.holds.open--
		waiting := t.holds.waiting
		t.holds.waiting = nil
		for _, s := range waiting {
			s.holdWaits = false
		}
		t.holds.mu.Unlock()
		// Every release writes what waits, open holds or not: holds that
		// keep overlapping never keep a sender's envelope back for
		// longer than one of them lasts.
		for _, s := range waiting {
			s.mu.Lock()
			s.writeHeldLocked()
			s.mu.Unlock()
		}
	}
}

// deferWriteLocked reports whether the write a send would start now (inline,
// or by waking the writer) waits for a hold's release instead, and if so
// records the session for it. s.mu is held.
func (t *Transport) deferWriteLocked(s *session) bool {
	if t.holding.Load() == 0 {
		return false
	}
	t.holds.mu.Lock()
	defer t.holds.mu.Unlock()
	if t.holds.open == 0 {
		return false // released meanwhile: write now
	}
	if !s.holdWaits {
		s.holdWaits = true
		t.holds.waiting = append(t.holds.waiting, s)
	}
	return true
}

// writeHeldLocked writes what a hold kept back, as the send would have:
// inline if the turn is free, else by the writer. s.mu is held.
func (s *session) writeHeldLocked() {
	c := s.conn
	switch {
	case c == nil:
		// The send asked for a dial; the connection writes what is queued.
	case c.raw != nil && !c.writing:
		c.writeInlineLocked(inlineBudget)
	default:
		s.kick()
	}
}
