package replicanode

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/troupe-go/troupe/internal/replicastore"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/wire"
)

// Config configures a Node. Endpoint is required; the zero value of every
// other field means its default.
type Config struct {
	// Endpoint carries the replication stream. The node sets the handler
	// of transport.StreamReplication; the endpoint's lifetime is the
	// caller's (membership and actors share it).
	Endpoint transport.Endpoint
	// Store is where the node persists its promises and records. The
	// caller opens and closes it. Nil: the node opens one from Replication
	// (Badger under DataDir, or memory without one) and closes it at Close.
	Store replicastore.Store
	// Replication says where the node's own store lives when Store is nil.
	Replication replication.Config
	// TickEvery is how often the node sends again what has not been
	// answered (prepares, accepts, read checks). Default 50ms.
	TickEvery time.Duration
	// MaxBatch is the most bytes of messages the node packs into one
	// envelope to a peer; a single larger message travels alone. Default
	// 256 KiB.
	MaxBatch int
	// MaxValue is the most bytes a write may carry in its value, key
	// (type and id) and slot name together; a larger write fails at once
	// with ErrValueTooLarge and does not happen. An accept that the
	// transport refuses to carry would be sent again at every tick and
	// never met its level. Default DefaultMaxValue, which fits the
	// transport's default message limit (wire.DefaultMaxMessage); set it
	// below the transport's limit when that is lower.
	MaxValue int
	// MaxWritesInFlight is the most writes of one key that may wait for
	// their level at once; past it Write and Delete fail at once with
	// ErrTooManyWrites (matching ErrUnavailable) and do not happen. It
	// bounds the memory and the retransmissions of a key whose level cannot
	// be met, whose abandoned writes are otherwise kept and sent again at
	// every tick. Default 1024.
	MaxWritesInFlight int
	// DeltaMin is the smallest value, in bytes, that a write sends as a
	// delta: to each replica that acknowledged the slot's previous record
	// at this owner's epoch, the write goes as an edit of that record when
	// the edit is smaller than half the value (a 64 KiB state with one
	// field changed crosses as a few bytes); to the others, and when sent
	// again, whole. Negative sends every write whole. Default
	// DefaultDeltaMin (256 bytes).
	DeltaMin int
	// Joining says that this node joins a cluster that already holds
	// state. A joining node whose store holds no records and never
	// recorded receiving anything starts receiving the whole ring: its
	// answers do not count toward quorums until CatchUp says it caught
	// up. A node that is not joining (the first members, bootstrapping)
	// and a node with records counts at once, except on what its store
	// records as still receiving and unless its store reports an unclean
	// stop (see Open). Default false.
	Joining bool
	// SyncChunk is the most bytes of records this node asks a source for
	// in one chunk of a catch-up, and sends in one chunk as a source; the
	// records of one ring token travel together, and go into a chunk
	// that holds others only if they fit, so a chunk exceeds it only when
	// it holds a single token's records (one key's, which a promise
	// carries in one message anyway). At most MaxValue. Default 1 MiB,
	// or SyncRate/32 when that is less (at least 64 KiB): a slower copy
	// in smaller chunks, so that the work of each is shorter.
	SyncChunk int
	// SyncRate is the most bytes per second a catch-up takes from its
	// sources together, so that application traffic keeps flowing beside
	// it; negative means unlimited. Default 32 MiB/s.
	SyncRate int
	// Logger receives the node's and badger's messages. Nil logs nothing.
	Logger *slog.Logger
	// Now dates the tombstones this node writes as an owner (see
	// Collect). Default time.Now.
	Now func() time.Time

	// ticks, when set (tests, through export_test.go), replaces the
	// timer: the node ticks once per value received.
	ticks <-chan struct{}
}

// Defaults.
const (
	DefaultTickEvery = 50 * time.Millisecond
	DefaultMaxBatch  = 256 << 10
	// DefaultMaxValue is Config.MaxValue's default: the transport's
	// default message limit less envelopeRoom.
	DefaultMaxValue = wire.DefaultMaxMessage - envelopeRoom
	// envelopeRoom is what an accept needs besides its record's value,
	// key and name: the envelope's header and the message's node
	// addresses, epochs and integers.
	envelopeRoom = 64 << 10
	// DefaultMaxWritesInFlight is Config.MaxWritesInFlight's default.
	DefaultMaxWritesInFlight = 1024
	// DefaultDeltaMin is Config.DeltaMin's default, in bytes.
	DefaultDeltaMin = 1 << 8
	// DefaultSyncChunk is Config.SyncChunk's default at the default
	// SyncRate or above.
	DefaultSyncChunk = 1 << 20
	// minPacedChunk is the smallest default SyncChunk.
	minPacedChunk = 64 << 10
	// DefaultSyncRate is Config.SyncRate's default, in bytes per second.
	DefaultSyncRate = 32 << 20
)

// ErrInvalidConfig is wrapped by the errors of Config.Validate; the
// message names the field.
var ErrInvalidConfig = errors.New("troupe: invalid replication node config")

// Validate reports a configuration that cannot work, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Endpoint == nil:
		return fmt.Errorf("%w: Endpoint is required", ErrInvalidConfig)
	case c.TickEvery < 0:
		return fmt.Errorf("%w: TickEvery %v is negative", ErrInvalidConfig, c.TickEvery)
	case c.MaxBatch < 0:
		return fmt.Errorf("%w: MaxBatch %d is negative", ErrInvalidConfig, c.MaxBatch)
	case c.MaxValue < 0:
		return fmt.Errorf("%w: MaxValue %d is negative", ErrInvalidConfig, c.MaxValue)
	case c.MaxWritesInFlight < 0:
		return fmt.Errorf("%w: MaxWritesInFlight %d is negative", ErrInvalidConfig, c.MaxWritesInFlight)
	case c.SyncChunk < 0:
		return fmt.Errorf("%w: SyncChunk %d is negative", ErrInvalidConfig, c.SyncChunk)
	case c.SyncChunk > cmp.Or(c.MaxValue, DefaultMaxValue):
		return fmt.Errorf("%w: SyncChunk %d exceeds MaxValue %d, what the transport carries", ErrInvalidConfig, c.SyncChunk, cmp.Or(c.MaxValue, DefaultMaxValue))
	case c.Store != nil && (c.Replication != replication.Config{}):
		return fmt.Errorf("%w: Store and Replication are exclusive", ErrInvalidConfig)
	}
	if err := c.Replication.Validate(); err != nil {
		return fmt.Errorf("Replication: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.TickEvery == 0 {
		c.TickEvery = DefaultTickEvery
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxValue == 0 {
		c.MaxValue = DefaultMaxValue
	}
	if c.MaxWritesInFlight == 0 {
		c.MaxWritesInFlight = DefaultMaxWritesInFlight
	}
	if c.SyncRate == 0 {
		c.SyncRate = DefaultSyncRate
	}
	if c.SyncChunk == 0 {
		c.SyncChunk = min(DefaultSyncChunk, c.MaxValue)
		if c.SyncRate > 0 {
			// A paced copy's chunks come apart in time, each a burst of
			// work (about 0.1 s of CPU per MiB across the members) that
			// the asks beside it wait behind: a smaller one is a shorter
			// wait. Measured at 2 and 4 MiB/s, 128 KiB chunks took the
			// asks' p99 from 2.4 and 3.1 times idle to 1.6 and 1.7.
			c.SyncChunk = min(c.SyncChunk, max(minPacedChunk, c.SyncRate/32))
		}
	}
	if c.DeltaMin == 0 {
		c.DeltaMin = DefaultDeltaMin
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
