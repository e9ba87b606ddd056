package continuity

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// Errors answered by the record's owner, which keep their identity across
// members.
var (
	// ErrConflict reports a Submit whose key names a record of another
	// request.
	ErrConflict = errors.New("troupe: continuity: the key was first used for another request")
	// ErrInProgress reports a Submit of a record whose current attempt
	// still holds its lease.
	ErrInProgress = errors.New("troupe: continuity: the request is in progress")
	// ErrStaleAttempt reports a Complete or Reject by an attempt that a
	// later one superseded, or of a record already ended by another
	// outcome.
	ErrStaleAttempt = errors.New("troupe: continuity: the attempt no longer owns the record")
	// ErrNotFound reports a Complete or Reject of a record that does not
	// exist (never submitted, or forgotten after its retention).
	ErrNotFound = errors.New("troupe: continuity: no such record")
	// ErrInvalid reports a scope, tenant or key that cannot name a record:
	// each must be visible ASCII without spaces, the scope and the tenant
	// at most 64 bytes, the key 1 to 255 (the tenant may be empty).
	ErrInvalid = errors.New("troupe: continuity: invalid name")
)

// Phase is where a record stands.
type Phase uint8

// Phases of a record.
const (
	// Submitted: admitted, its work not ended yet.
	Submitted Phase = iota + 1
	// Completed: its work succeeded; Response is what retries get.
	Completed
	// Rejected: its work was refused; Reason says why.
	Rejected
)

func (p Phase) String() string {
	switch p {
	case Submitted:
		return "submitted"
	case Completed:
		return "completed"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// Name names a record.
type Name struct {
	Scope  string // the kind of work, 1 to 64 bytes
	Tenant string // optional, at most 64 bytes
	Key    string // the idempotency key, 1 to 255 bytes
}

// actorKey returns the actor key of n's record: its parts cannot
// hold spaces, so no two names give one key.
func (n Name) actorKey() (string, error) {
	for _, p := range []struct {
		what, s     string
		least, most int
	}{{"scope", n.Scope, 1, 64}, {"tenant", n.Tenant, 0, 64}, {"key", n.Key, 1, 255}} {
		if len(p.s) < p.least || len(p.s) > p.most {
			return "", fmt.Errorf("%w: %s of %d bytes, want %d to %d", ErrInvalid, p.what, len(p.s), p.least, p.most)
		}
		for i := range len(p.s) {
			if c := p.s[i]; c < '!' || c > '~' {
				return "", fmt.Errorf("%w: %s: byte %d is not visible ASCII", ErrInvalid, p.what, i)
			}
		}
	}
	return n.Scope + " " + n.Tenant + " " + n.Key, nil
}

// Record is one continuity record.
type Record struct {
	// Hash is the SHA-256 of the request as submitted.
	Hash [32]byte
	// Attempt counts the executions started, from 1; only the latest may
	// end the record.
	Attempt uint64
	Phase   Phase
	// Response is what a completed record's retries get; Reason why a
	// rejected one was refused.
	Response []byte
	Reason   string
	// RequestID is the request id of the Submit that started the
	// current attempt (actor.WithRequestID, or one made for it).
	RequestID string
	// Submitted is when the first attempt was admitted, Updated when the
	// record last changed, LeaseEnd when the current attempt's lease ends
	// (a Submit after it starts the next attempt).
	Submitted, Updated, LeaseEnd time.Time
	// Retain is how long the record is kept once ended.
	Retain time.Duration
}

// Done reports whether the record ended: completed or rejected.
func (r Record) Done() bool { return r.Phase == Completed || r.Phase == Rejected }

// Ticket is an attempt's right to end its record.
type Ticket struct {
	Name    Name
	Attempt uint64
}

// Options tune Submit.
type Options struct {
	// Lease is how long an attempt owns its record before a Submit may
	// start the next one. Default 30 s. Choose it longer than the work
	// takes, plus the clock skew between members (the owner that admits
	// a retry may not be the one that set the lease): a lease that ends
	// under a live worker lets a retry run the work again (the older
	// worker then fails to end the record).
	Lease time.Duration
	// Retain is how long the record is kept once ended. Default 24 h.
	Retain time.Duration
}

// Defaults of Options.
const (
	DefaultLease  = 30 * time.Second
	DefaultRetain = 24 * time.Hour
)

// Submit admits the work that request names under n. It returns the
// record and, when the caller is to run the work (a new record, or the
// next attempt of one whose lease ended), a ticket to end it with; no
// ticket (zero Attempt) when the record ended already: answer from it.
// It fails with ErrConflict when n names another request, and with
// ErrInProgress while the current attempt holds its lease.
func Submit(ctx context.Context, sys actor.System, n Name, request []byte, opts Options) (Ticket, Record, error) {
	key, err := n.actorKey()
	if err != nil {
		return Ticket{}, Record{}, err
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Retain <= 0 {
		opts.Retain = DefaultRetain
	}
	got, err := actor.Ask(ctx, records.Ref(sys, key), submit{Hash: sha256.Sum256(request), Lease: opts.Lease, Retain: opts.Retain})
	if err != nil {
		return Ticket{}, got.Record, err
	}
	if !got.Run {
		return Ticket{}, got.Record, nil
	}
	return Ticket{Name: n, Attempt: got.Record.Attempt}, got.Record, nil
}

// Complete ends t's record as completed with response, which the
// record's retries get. It fails with ErrStaleAttempt when a later
// attempt superseded t or the record ended otherwise, and with
// ErrNotFound when there is no record. Completing again with the same
// response returns the record.
func Complete(ctx context.Context, sys actor.System, t Ticket, response []byte) (Record, error) {
	return end(ctx, sys, t, finish{Attempt: t.Attempt, Phase: Completed, Response: response})
}

// Reject ends t's record as rejected, for reason: its retries get the
// rejection. It fails as Complete does.
func Reject(ctx context.Context, sys actor.System, t Ticket, reason string) (Record, error) {
	return end(ctx, sys, t, finish{Attempt: t.Attempt, Phase: Rejected, Reason: reason})
}

func end(ctx context.Context, sys actor.System, t Ticket, m finish) (Record, error) {
	key, err := t.Name.actorKey()
	if err != nil {
		return Record{}, err
	}
	if t.Attempt == 0 {
		return Record{}, fmt.Errorf("%w: a ticket without an attempt (the record had ended when submitted)", ErrStaleAttempt)
	}
	return actor.Ask(ctx, records.Ref(sys, key), m)
}

// Get returns n's record; ok is false when there is none.
func Get(ctx context.Context, sys actor.System, n Name) (rec Record, ok bool, err error) {
	key, err := n.actorKey()
	if err != nil {
		return Record{}, false, err
	}
	got, err := actor.Ask(ctx, records.Ref(sys, key), get{})
	return got.Record, got.Found, err
}

// Messages of a record.
type (
	msg interface{ continuity() }

	submit struct {
		actor.Reply[msg, submitted]
		Hash   [32]byte
		Lease  time.Duration
		Retain time.Duration
	}
	submitted struct {
		Record Record
		Run    bool // the caller runs the work
	}
	finish struct {
		actor.Reply[msg, Record]
		Attempt  uint64
		Phase    Phase
		Response []byte
		Reason   string
	}
	get struct {
		actor.Reply[msg, found]
	}
	found struct {
		Record Record
		Found  bool
	}
	expire struct{}
	// evict deletes the record if it is still the ended one its member's
	// ledger counted, ended at Ended.
	evict struct {
		Ended time.Time
	}
)

func (submit) continuity() {}
func (finish) continuity() {}
func (get) continuity()    {}
func (expire) continuity() {}
func (evict) continuity()  {}

func (get) ReadOnly() {}

// replicas is how many copies of each record a cluster keeps.
const replicas = 3

// records holds the records, one key each; Actors returns it with the
// member's ledger.
var records = actor.Define("troupe.continuity", handle,
	actor.WithReplicas(replicas, actor.WriteMajority),
	actor.WithErrors(ErrConflict, ErrInProgress, ErrStaleAttempt, ErrNotFound),
).WithMessages(submit{}, finish{}, get{}, expire{}, evict{})

// handle runs the first message of an activation: a record found ended
// is counted by this member's ledger (it ended under another owner, or
// before this activation), then the activation goes on with handleActive.
func handle(c *actor.Context[Record, msg], m msg) error {
	c.Become(handleActive)
	return step(c, m, true)
}

func handleActive(c *actor.Context[Record, msg], m msg) error { return step(c, m, false) }

// step runs a record's messages; the zero Record (Phase 0) is none.
func step(c *actor.Context[Record, msg], m msg, fresh bool) error {
	r := c.State()
	// Wall clock only: ends are compared with ends read back from the
	// store and with the ledger's, across members and clock steps.
	now := time.Now().Round(0)
	if r.Done() && now.After(r.Updated.Add(r.Retain)) {
		// Past its retention, its ledger's evict not arrived (the ledger
		// is on a member that failed or restarted since): gone. A submit
		// makes a new record in its place, which must not be deleted.
		if _, again := m.(submit); again {
			tellLedger(c, forgotten{Key: c.Key(), Ended: r.Updated})
		} else {
			forget(c, r)
		}
		r, fresh = Record{}, false
	}
	if e, ok := m.(evict); fresh && r.Done() && (!ok || !e.Ended.Equal(r.Updated)) {
		// Counted here from now on; not when the evict deletes it anyway.
		tellLedger(c, endedOf(c, r))
	}
	switch m := m.(type) {
	case submit:
		switch {
		case r.Phase == 0:
			r = Record{Hash: m.Hash, Attempt: 1, Phase: Submitted, RequestID: c.RequestID(),
				Submitted: now, Updated: now, LeaseEnd: now.Add(m.Lease), Retain: m.Retain}
		case r.Hash != m.Hash:
			return fmt.Errorf("%w: record %q", ErrConflict, c.Key())
		case r.Done():
			return actor.Respond(c, m, submitted{Record: r})
		case now.Before(r.LeaseEnd):
			return fmt.Errorf("%w: record %q, attempt %d leased until %s", ErrInProgress, c.Key(), r.Attempt, r.LeaseEnd.Format(time.RFC3339Nano))
		default:
			r.Attempt++
			r.RequestID, r.Updated, r.LeaseEnd = c.RequestID(), now, now.Add(m.Lease)
		}
		c.SetState(r)
		return actor.Respond(c, m, submitted{Record: r, Run: true})
	case finish:
		switch {
		case r.Phase == 0:
			return fmt.Errorf("%w: record %q", ErrNotFound, c.Key())
		case r.Attempt != m.Attempt:
			return fmt.Errorf("%w: record %q is at attempt %d, not %d", ErrStaleAttempt, c.Key(), r.Attempt, m.Attempt)
		case r.Done():
			if r.Phase == m.Phase && string(r.Response) == string(m.Response) && r.Reason == m.Reason {
				return actor.Respond(c, m, r) // the same end again: a retry of Complete
			}
			return fmt.Errorf("%w: record %q ended already (%v)", ErrStaleAttempt, c.Key(), r.Phase)
		}
		r.Phase, r.Response, r.Reason, r.Updated = m.Phase, m.Response, m.Reason, now
		c.SetState(r)
		// The reply first: it may leave once the write met its level
		// while the activation goes on, where an output before it would
		// wait for the write in the handler.
		err := actor.Respond(c, m, r)
		tellLedger(c, endedOf(c, r))
		return err
	case get:
		return actor.Respond(c, m, found{Record: r, Found: r.Phase != 0})
	case expire:
		// A timer that records ended before their ledger kept their
		// retention set; the ledger's evicts do it now.
		if r.Done() {
			forget(c, r)
		}
	case evict:
		// Only the ended record the ledger counted: never a submitted
		// one, nor a later record under the key.
		if r.Done() && r.Updated.Equal(m.Ended) {
			forget(c, r)
		}
	}
	return nil
}

// forget deletes the ended record r, leaving a tombstone, and uncounts it.
func forget(c *actor.Context[Record, msg], r Record) {
	c.Delete()
	tellLedger(c, forgotten{Key: c.Key(), Ended: r.Updated})
}

// endedOf is the ledger's entry of the ended record r.
func endedOf(c *actor.Context[Record, msg], r Record) ended {
	return ended{Key: c.Key(), Ended: r.Updated, Expires: r.Updated.Add(r.Retain), Size: footprint(c, r)}
}

// footprint is what r takes as Bounds.MaxBytes counts it.
func footprint(c *actor.Context[Record, msg], r Record) int64 {
	copies := int64(replicas)
	if c.Member() == "" {
		copies = 1 // a standalone system keeps one
	}
	return copies * int64(RecordOverhead+2*len(c.Key())+len(r.Response)+len(r.Reason)+len(r.RequestID)) // the key: the record's and the promise's
}

// tellLedger tells this member's ledger m. The ledger is on this member
// and never waits on a record, so the tell does not wait for room
// either: one its mailbox refuses leaves the record uncounted until its
// next activation counts it again. A tell that fails otherwise failed
// the record's write (the tell is an output, which waits for it): the
// activation is lost, and its asker hears why.
func tellLedger(c *actor.Context[Record, msg], m ledgerMsg) {
	err := ledgerAt(c.System(), c.Member()).Tell(c, m)
	switch {
	case err == nil:
	case errors.Is(err, actor.ErrMailboxFull):
		c.Logger().Warn("troupe: continuity: the member's ledger is full and missed a record until its next use",
			"record", c.Key(), "err", err)
	default:
		c.Logger().Debug("troupe: continuity: the ledger not told", "record", c.Key(), "err", err)
	}
}
