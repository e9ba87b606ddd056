package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// RecordMsg is what a key's record actor (Records) accepts.
type RecordMsg interface{ idempotencyRecord() }

// BeginRecord is ActorStore.Begin's request.
type BeginRecord struct {
	actor.Reply[RecordMsg, Claim]
	Hash Hash
	// Lease is how long an attempt holds the key before another may
	// start, in nanoseconds.
	Lease int64
	// Retention is how long a record whose attempt never completed is
	// kept after its lease ends, in nanoseconds (0: until the key is
	// used again).
	Retention int64
}

// CompleteRecord is ActorStore.Complete's request; it answers whether the
// attempt was the key's current one.
type CompleteRecord struct {
	actor.Reply[RecordMsg, bool]
	Attempt  uint64
	Response Response
	// Retention is how long the response is kept, in nanoseconds.
	Retention int64
}

// ExpireRecord is the message of a record's own timer, set for when it
// expires: the record then deletes itself (a tombstone its members
// collect later). Sent before then, it does nothing.
type ExpireRecord struct{}

func (BeginRecord) idempotencyRecord()    {}
func (CompleteRecord) idempotencyRecord() {}
func (ExpireRecord) idempotencyRecord()   {}

// expireTimer names a record's expiry timer.
const expireTimer = "expire"

// record is the state of one scoped key.
type record struct {
	Hash    Hash
	Attempt uint64
	// Until is when the attempt's lease ends (in progress) or when the
	// record expires (done), in Unix nanoseconds of the owner's clock.
	Until    int64
	Done     bool
	Response Response
	// Expires is when an attempt that never completed is forgotten
	// (0: never, before the key is used again).
	Expires int64
}

// expired reports whether r may be forgotten at now.
func (r record) expired(now int64) bool {
	if r.Done {
		return now >= r.Until
	}
	return r.Expires != 0 && now >= r.Expires
}

// Records is the actor type of ActorStore's records, one actor per scoped
// key, each kept on three members and written to two before it answers.
// Every member of a cluster that serves an ActorStore must host it
// (system.Config.Actors).
var Records = actor.Define("troupe.idempotency", handleRecord,
	actor.WithReplicas(3, actor.WriteMajority)).WithMessages(BeginRecord{}, CompleteRecord{}, ExpireRecord{})

func handleRecord(c *actor.Context[record, RecordMsg], m RecordMsg) error {
	now := time.Now().UnixNano()
	r := c.State()
	switch m := m.(type) {
	case BeginRecord:
		if r.Attempt != 0 && r.expired(now) {
			r = record{}
		}
		switch {
		case r.Attempt != 0 && r.Hash != m.Hash:
			return actor.Respond(c, m, Claim{Outcome: Conflict})
		case r.Done:
			resp := r.Response
			return actor.Respond(c, m, Claim{Outcome: Replay, Response: &resp})
		case r.Attempt != 0 && now < r.Until:
			return actor.Respond(c, m, Claim{Outcome: InProgress})
		}
		// A new key, or an attempt whose lease ended (its server died or
		// hangs): a new attempt, which fences the old one out.
		r = record{Hash: m.Hash, Attempt: newAttempt(r.Attempt), Until: now + m.Lease}
		if m.Retention > 0 {
			r.Expires = r.Until + m.Retention
			c.After(expireTimer, time.Duration(r.Expires-now), ExpireRecord{})
		}
		c.SetState(r)
		return actor.Respond(c, m, Claim{Outcome: Started, Attempt: r.Attempt})
	case CompleteRecord:
		if r.Attempt != m.Attempt || r.Done {
			return actor.Respond(c, m, false)
		}
		r.Done, r.Response, r.Until = true, m.Response, now+m.Retention
		// Stored with the record, the timer lets the key sleep and wakes
		// it to expire: records leave the stores, not only the answers.
		c.After(expireTimer, time.Duration(m.Retention), ExpireRecord{})
		c.SetState(r)
		return actor.Respond(c, m, true)
	case ExpireRecord:
		switch {
		case r.Attempt == 0:
		case r.expired(now):
			c.Delete()
		case r.Done:
			// Early (the clock went back, or someone sent it): again
			// when it is due.
			c.After(expireTimer, time.Duration(r.Until-now), ExpireRecord{})
		case r.Expires != 0:
			c.After(expireTimer, time.Duration(r.Expires-now), ExpireRecord{})
		}
	}
	return nil
}

// newAttempt returns a random attempt id other than 0 and prev: ids stay
// unique across a record's expiry, which forgets the previous one.
func newAttempt(prev uint64) uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if a := binary.LittleEndian.Uint64(b[:]); a != 0 && a != prev {
			return a
		}
	}
}

// ActorConfig configures an ActorStore. The zero value means the
// defaults.
type ActorConfig struct {
	// Lease is how long an attempt holds its key: a request with the same
	// key is answered "in progress" meanwhile, and after it a new attempt
	// starts (the first one's Complete then fails with ErrStaleAttempt).
	// Make it longer than the slowest handler. Default 5 minutes.
	Lease time.Duration
	// Retention is how long a completed record is kept. Default 24 h.
	Retention time.Duration
}

// ActorStore keeps the records in a Troupe cluster, one Records actor per
// scoped key: every web server that reaches the cluster (through a
// client.Client or as a member) shares them, Begin is atomic per key
// since one actor owns it, and a record survives the loss of any one
// member. A record past its retention is treated as absent, and deletes
// itself then: its stored timer wakes it (a record waits asleep, in the
// members' stores, not in memory), and the tombstone it leaves is
// collected after the members' TombstoneAge. A record whose attempt
// never completed expires a retention after its lease ends.
type ActorStore struct {
	sys actor.System
	cfg ActorConfig
}

// NewActorStore returns a store over sys, whose cluster hosts Records.
func NewActorStore(sys actor.System, cfg ActorConfig) (*ActorStore, error) {
	switch {
	case sys == nil:
		return nil, fmt.Errorf("%w: NewActorStore: nil system", ErrInvalidConfig)
	case cfg.Lease < 0:
		return nil, fmt.Errorf("%w: ActorConfig.Lease %v is negative", ErrInvalidConfig, cfg.Lease)
	case cfg.Retention < 0:
		return nil, fmt.Errorf("%w: ActorConfig.Retention %v is negative", ErrInvalidConfig, cfg.Retention)
	}
	if cfg.Lease == 0 {
		cfg.Lease = 5 * time.Minute
	}
	if cfg.Retention == 0 {
		cfg.Retention = 24 * time.Hour
	}
	return &ActorStore{sys: sys, cfg: cfg}, nil
}

// recordKey names a scoped key's actor: each part length-prefixed, so no
// two scopes share a name.
func recordKey(s Scope, key string) string {
	b := make([]byte, 0, len(s.App)+len(s.Route)+len(s.Tenant)+len(key)+16)
	for _, p := range [...]string{s.App, s.Route, s.Tenant, key} {
		b = strconv.AppendInt(b, int64(len(p)), 10)
		b = append(b, ':')
		b = append(b, p...)
	}
	return string(b)
}

// Begin implements Store.
func (a *ActorStore) Begin(ctx context.Context, s Scope, key string, h Hash) (Claim, error) {
	c, err := actor.Ask(ctx, Records.Ref(a.sys, recordKey(s, key)), BeginRecord{Hash: h, Lease: int64(a.cfg.Lease), Retention: int64(a.cfg.Retention)})
	if err != nil {
		return Claim{}, fmt.Errorf("troupe: idempotency record %q: %w", key, err)
	}
	return c, nil
}

// Complete implements Store.
func (a *ActorStore) Complete(ctx context.Context, s Scope, key string, attempt uint64, r Response) error {
	ok, err := actor.Ask(ctx, Records.Ref(a.sys, recordKey(s, key)), CompleteRecord{Attempt: attempt, Response: r, Retention: int64(a.cfg.Retention)})
	switch {
	case err != nil:
		return fmt.Errorf("troupe: idempotency record %q: %w", key, err)
	case !ok:
		return fmt.Errorf("%w: %q attempt %d", ErrStaleAttempt, key, attempt)
	}
	return nil
}
