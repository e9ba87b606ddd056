package transport

import (
	"errors"
	"time"

	"github.com/troupe-go/troupe/wire"
)

// refusalSummaryEvery is how often repeated handshake refusals from one
// address are summarised in the log after the first is logged in full: a
// misconfigured peer retried every heartbeat would otherwise fill the log.
const refusalSummaryEvery = 10 * time.Second

// dialNotes is what the transport remembers of its dials, per address:
// the last failure (for DialError) and the refusals not yet logged.
type dialNotes struct {
	lastErr  map[string]error
	refusals map[string]*refusalLog
}

type refusalLog struct {
	logged time.Time // when the last line about this address was written
	quiet  int       // refusals since then, not logged
}

// DialError returns the error of the last dial to addr (an advertised
// address), or nil when none failed since the last connection to it came
// up, or none was tried. A handshake refusal is a *wire.Refused. Joins
// use it to say why the seeds did not answer.
func (t *Transport) DialError(addr string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notes.lastErr[addr]
}

// maxDialNotes bounds the addresses whose last dial error the transport
// remembers: far more than a join has seeds.
const maxDialNotes = 1024

// noteDial records the outcome of one dial to addr; a refusal is logged
// at Warn the first time, then once per refusalSummaryEvery with the
// count of those in between.
func (t *Transport) noteDial(addr string, err error) {
	now := time.Now()
	t.mu.Lock()
	if err == nil {
		delete(t.notes.lastErr, addr)
		delete(t.notes.refusals, addr)
		t.mu.Unlock()
		return
	}
	if t.notes.lastErr == nil || len(t.notes.lastErr) >= maxDialNotes {
		// Addresses come and go (a cluster's churn): past the bound the
		// notes start afresh rather than grow for the transport's life.
		t.notes.lastErr = map[string]error{}
		t.notes.refusals = map[string]*refusalLog{}
	}
	t.notes.lastErr[addr] = err
	var refused *wire.Refused
	if !errors.As(err, &refused) || refused.Reason == wire.RefusedTimeout {
		t.mu.Unlock()
		t.log.Debug("troupe: wire: dial failed", "addr", addr, "err", err)
		return
	}
	r := t.notes.refusals[addr]
	switch {
	case r == nil:
		t.notes.refusals[addr] = &refusalLog{logged: now}
		t.mu.Unlock()
		t.log.Warn("troupe: wire: handshake refused", "addr", addr, "err", err)
	case now.Sub(r.logged) >= refusalSummaryEvery:
		n := r.quiet + 1
		r.logged, r.quiet = now, 0
		t.mu.Unlock()
		t.log.Warn("troupe: wire: handshake refused again", "addr", addr, "times", n, "since", refusalSummaryEvery, "err", err)
	default:
		r.quiet++
		t.mu.Unlock()
	}
}
