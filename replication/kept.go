package replication

import (
	"errors"
	"fmt"
	"time"
)

// KeptAnswers bounds the answers a member keeps for keyed asks to its
// Durable and replicated actors. Each key keeps the answers of its last
// keyed asks, none older than Retain: the last 16 to 48 in its record,
// the older ones in pages beside it, up to 192 pages and 1 MiB, past
// which the oldest go first; a
// member keeps at most MaxAnswers and MaxBytes of them across its keys:
// past a bound the keys holding the oldest answers drop those older than
// the oldest answer left elsewhere, each such drop a write of the key's
// record, in rounds that aim at about 90% of the bound (a key holding
// many of the oldest answers may take several rounds). A request
// admitted and not answered yet (system.Config.StrictDurability) is never
// dropped by a bound, only past Retain. A retry whose answer was dropped
// runs its handler again. The zero value means the defaults; a member
// takes them as system.Config.KeptAnswers.
//
// The member's ledger of kept answers lives in memory and counts the
// keys it owns as their records are written or loaded: its entries are
// hints. A restarted member's ledger starts empty and counts a key once
// it is used; answers past Retain in a key never used again leave its
// record when its owner wakes it for them, as it wakes keys with timers;
// a key that moved is counted by its new owner once used there;
// under a steady stream the member holds its bounds once the prunes its
// ledger sent are written, plus the answers kept meanwhile.
type KeptAnswers struct {
	// MaxAnswers is how many answers the member keeps, each counted
	// once. Default DefaultMaxKeptAnswers (1,000,000).
	MaxAnswers int
	// MaxBytes is how many bytes those answers take at all their copies
	// (each answer's key, request hash, request id, reply or error and
	// 16 bytes, times its actor's replicas in a cluster). Default
	// DefaultMaxKeptBytes (8 GiB).
	MaxBytes int64
	// Retain is how long an answer is kept. Default
	// DefaultKeptRetention (24 h).
	Retain time.Duration
}

// Defaults of KeptAnswers.
const (
	DefaultMaxKeptAnswers = 1_000_000
	DefaultMaxKeptBytes   = 8 << 30 // 8 GiB
	DefaultKeptRetention  = 24 * time.Hour
	// MaxKeptRetention is the longest Retain: answers are dated in Unix
	// nanoseconds, and a time that far ahead still fits in them.
	MaxKeptRetention = 100 * 365 * 24 * time.Hour
)

// WithDefaults returns k with its zero fields set to the defaults.
func (k KeptAnswers) WithDefaults() KeptAnswers {
	if k.MaxAnswers == 0 {
		k.MaxAnswers = DefaultMaxKeptAnswers
	}
	if k.MaxBytes == 0 {
		k.MaxBytes = DefaultMaxKeptBytes
	}
	if k.Retain == 0 {
		k.Retain = DefaultKeptRetention
	}
	return k
}

// Validate reports a bound that cannot be met, naming the field.
func (k KeptAnswers) Validate() error {
	var errs []error
	if k.MaxAnswers < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxAnswers is %d, want 0 (the default, %d) or more", ErrInvalidConfig, k.MaxAnswers, DefaultMaxKeptAnswers))
	}
	if k.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxBytes is %d, want 0 (the default, %d) or more", ErrInvalidConfig, k.MaxBytes, int64(DefaultMaxKeptBytes)))
	}
	if k.Retain < 0 || k.Retain > MaxKeptRetention {
		errs = append(errs, fmt.Errorf("%w: Retain is %v, want 0 (the default, %v) to %v", ErrInvalidConfig, k.Retain, DefaultKeptRetention, MaxKeptRetention))
	}
	return errors.Join(errs...)
}
