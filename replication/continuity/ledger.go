package continuity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-go/troupe/actor"
)

// Bounds limit the ended (completed or rejected) records of one member:
// those whose owner on the member ended them, or found them ended when it
// took them over. Past a bound the oldest go first; submitted records are
// neither counted nor ever dropped. The zero value means the defaults.
type Bounds struct {
	// MaxRecords is how many ended records the member keeps, each counted
	// once. Default DefaultMaxRecords.
	MaxRecords int
	// MaxBytes is how many bytes the member's ended records take in the
	// stores, at all their copies: each record counts as its response,
	// reason and request id, twice its key, and RecordOverhead, times 3
	// in a cluster (its replicas) and once in a standalone system. These
	// are the bytes the store is given; its own overhead on disk
	// (compaction, an LSM's levels) comes on top. On a cluster whose
	// ring spreads keys evenly a member's store holds about the bytes
	// its own ledger counts. Default DefaultMaxBytes.
	MaxBytes int64
}

// Defaults of Bounds, and the estimate of a record's size besides its
// variable parts.
const (
	DefaultMaxRecords = 1_000_000
	DefaultMaxBytes   = 8 << 30 // 8 GiB
	// RecordOverhead is what a record takes besides its key, response,
	// reason and request id: its other fields and its timer encoded, the
	// framing of the runtime's record and of the store, and its key's
	// ownership promise.
	RecordOverhead = 384
)

// ErrInvalidBounds reports Bounds that Validate refuses.
var ErrInvalidBounds = errors.New("troupe: continuity: invalid bounds")

// minMaxBytes is the smallest MaxBytes: one record's overhead at every
// copy. Below it every record would be evicted as it ended, and every
// retry would run its work again.
const minMaxBytes = replicas * RecordOverhead

// Validate reports a bound that cannot be met, naming the field.
func (b Bounds) Validate() error {
	if b.MaxRecords < 0 {
		return fmt.Errorf("%w: MaxRecords is %d, want 0 (the default, %d) or more", ErrInvalidBounds, b.MaxRecords, DefaultMaxRecords)
	}
	if b.MaxBytes < 0 || (b.MaxBytes > 0 && b.MaxBytes < minMaxBytes) {
		return fmt.Errorf("%w: MaxBytes is %d, want 0 (the default, %d) or at least %d (one record's overhead at its %d copies)",
			ErrInvalidBounds, b.MaxBytes, int64(DefaultMaxBytes), minMaxBytes, replicas)
	}
	return nil
}

func (b Bounds) withDefaults() Bounds {
	if b.MaxRecords == 0 {
		b.MaxRecords = DefaultMaxRecords
	}
	if b.MaxBytes == 0 {
		b.MaxBytes = DefaultMaxBytes
	}
	return b
}

// Actors returns the definitions that keep continuity records, for
// system.Config.Actors of every member (or of the standalone system): the
// records, and the member's ledger, which holds the member's ended
// records within b. Members may choose different bounds.
func Actors(b Bounds) ([]actor.Definition, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return []actor.Definition{records, defineLedger(ledgerHandler(b.withDefaults()))}, nil
}

// Usage is what a member's ledger counts against its Bounds.
type Usage struct {
	Records int   // ended records
	Bytes   int64 // their bytes, as Bounds.MaxBytes counts them
}

// UsageOf returns the usage of the ledger of member (an address as in
// system.Members; "" for a standalone system).
func UsageOf(ctx context.Context, sys actor.System, member string) (Usage, error) {
	return actor.Ask(ctx, ledgerAt(sys, member), usage{})
}

// Messages of a ledger.
type (
	ledgerMsg interface{ ledger() }

	// ended counts Key's record, which ended at Ended, is kept until
	// Expires and takes Size bytes (re-sent by each activation of the
	// record that finds it ended).
	ended struct {
		Key     string
		Ended   time.Time
		Expires time.Time
		Size    int64
	}
	// sweep evicts the records whose retention ended: the ledger's timer.
	sweep struct{}
	// forgotten uncounts Key's record that ended at Ended: it was deleted.
	forgotten struct {
		Key   string
		Ended time.Time
	}
	usage struct {
		actor.Reply[ledgerMsg, Usage]
	}
)

func (ended) ledger()     {}
func (sweep) ledger()     {}
func (forgotten) ledger() {}
func (usage) ledger()     {}

func (usage) ReadOnly() {}

const (
	ledgerName = "troupe.continuity.ledger"
	ledgerKey  = "ledger"
	// ledgerMailbox holds a burst of ends: a record whose tell is refused
	// is bounded by its retention only, until its next activation.
	ledgerMailbox = 1 << 16
)

// defineLedger defines a ledger: pinned, one per member, kept in memory
// and never passivated (its index would be lost). Its state is a pointer
// that its handler changes in place: copying an index of a million
// entries per message is not affordable, and the handler cannot fail
// between a change and its end.
func defineLedger(h actor.Handler[*index, ledgerMsg]) *actor.Def[*index, ledgerMsg] {
	return actor.Define(ledgerName, h,
		actor.Pinned(),
		actor.WithIdleTimeout(actor.Never),
		actor.WithMailbox(ledgerMailbox, actor.Refuse),
	).WithMessages(ended{}, sweep{}, forgotten{}, usage{}).WithInit(func(string) *index { return newIndex() })
}

// sweepLate is how late past its time a sweep counts as lost.
const sweepLate = time.Minute

// errUnhosted answers a message to a ledger hosted from ledgers rather
// than from Actors (which never happens: ledgers only makes refs).
var errUnhosted = errors.New("troupe: continuity: a ledger hosted without Actors")

// ledgers addresses the members' ledgers. A ref goes by the definition's
// name and types, so it reaches the ledger Actors defined with the
// member's bounds; this definition is never hosted.
var ledgers = defineLedger(func(*actor.Context[*index, ledgerMsg], ledgerMsg) error { return errUnhosted })

func ledgerAt(sys actor.System, member string) actor.Ref[ledgerMsg] {
	if member == "" {
		return ledgers.Ref(sys, ledgerKey)
	}
	return ledgers.RefAt(sys, member, ledgerKey)
}

// ledgerHandler keeps a member's index within b and its records within
// their retention, telling the oldest records past b, and those whose
// retention ended, to evict themselves. An evict is routed to the
// record's current owner, which deletes the record only if it is still
// the ended one the index counted. One timer, set to the earliest end of
// retention, stands for every record's: a record holds no timer of its
// own, so that it can passivate once ended.
func ledgerHandler(b Bounds) actor.Handler[*index, ledgerMsg] {
	return func(c *actor.Context[*index, ledgerMsg], m ledgerMsg) error {
		x := c.State()
		switch m := m.(type) {
		case ended:
			x.add(m.Key, m.Ended, m.Expires, m.Size)
			evictAll(c, x.over(b))
			// Set the timer when none is (or the one set should have
			// fired by now: its sweep was lost), or sooner.
			if next, ok := x.nextExpiry(); ok && (x.sweepAt.IsZero() || next.Before(x.sweepAt) || time.Since(x.sweepAt) > sweepLate) {
				x.sweepAt = next
				c.After("sweep", time.Until(next), sweep{})
			}
		case sweep:
			x.sweepAt = time.Time{}
			evictAll(c, x.expired(time.Now()))
			if next, ok := x.nextExpiry(); ok {
				x.sweepAt = next
				c.After("sweep", time.Until(next), sweep{})
			}
		case forgotten:
			x.remove(m.Key, m.Ended)
		case usage:
			return actor.Respond(c, m, x.usage())
		}
		return nil
	}
}

// evictAll tells the records of es to evict themselves.
func evictAll(c *actor.Context[*index, ledgerMsg], es []entry) {
	for _, e := range es {
		if err := records.Ref(c.System(), e.key).Tell(c, evict{Ended: e.ended}); err != nil {
			c.Logger().Warn("troupe: continuity: a record to evict could not be told; it goes when next used past its retention, or by a later bound",
				"record", e.key, "err", err)
		}
	}
}
