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

// Validate reports a bound that cannot be met.
func (b Bounds) Validate() error {
	if b.MaxRecords < 0 {
		return fmt.Errorf("troupe: continuity: Bounds.MaxRecords is %d, want 0 (the default, %d) or more", b.MaxRecords, DefaultMaxRecords)
	}
	if b.MaxBytes < 0 {
		return fmt.Errorf("troupe: continuity: Bounds.MaxBytes is %d, want 0 (the default, %d) or more", b.MaxBytes, int64(DefaultMaxBytes))
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

	// ended counts Key's record, which ended at Ended and takes Size
	// bytes (re-sent by each activation of the record that finds it ended).
	ended struct {
		Key   string
		Ended time.Time
		Size  int64
	}
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
	).WithMessages(ended{}, forgotten{}, usage{}).WithInit(func(string) *index { return newIndex() })
}

// ledgers addresses the members' ledgers. A ref goes by the definition's
// name and types, so it reaches the ledger Actors defined with the
// member's bounds; this definition is never hosted.
var ledgers = defineLedger(func(*actor.Context[*index, ledgerMsg], ledgerMsg) error {
	return errors.New("troupe: continuity: a ledger hosted without Actors")
})

func ledgerAt(sys actor.System, member string) actor.Ref[ledgerMsg] {
	if member == "" {
		return ledgers.Ref(sys, ledgerKey)
	}
	return ledgers.RefAt(sys, member, ledgerKey)
}

// ledgerHandler keeps a member's index within b, telling the oldest
// records past it to evict themselves. An evict is routed to the record's
// current owner, which deletes the record only if it is still the ended
// one the index counted.
func ledgerHandler(b Bounds) actor.Handler[*index, ledgerMsg] {
	return func(c *actor.Context[*index, ledgerMsg], m ledgerMsg) error {
		x := c.State()
		switch m := m.(type) {
		case ended:
			x.add(m.Key, m.Ended, m.Size)
			for _, e := range x.over(b) {
				if err := records.Ref(c.System(), e.key).Tell(c, evict{Ended: e.ended}); err != nil {
					c.Logger().Warn("troupe: continuity: a record past the member's bounds could not be evicted; its retention bounds it",
						"record", e.key, "err", err)
				}
			}
		case forgotten:
			x.remove(m.Key, m.Ended)
		case usage:
			return actor.Respond(c, m, x.usage())
		}
		return nil
	}
}
