package system

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/noderecord"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/wire"
)

// Config configures a System. The zero value works: it hosts no actor
// types, logs nothing and uses the defaults below.
type Config struct {
	// Actors are the definitions this system hosts. Every node of a
	// cluster registers the same ones.
	Actors []actor.Definition

	// Logger receives the runtime's logs. Nil discards them.
	Logger *slog.Logger

	// Observer, if set, is called synchronously for every activation
	// start, end and failure, dropped message and full mailbox. It must
	// be fast and must not block: it runs on the actors' goroutines.
	Observer func(Event)

	// IdleTimeout passivates keys without messages, timers or a running
	// body for this long, for definitions that do not set their own:
	// their state, neither replicated nor durable, is dropped, and the
	// next message starts the key from its initial state. Default 1
	// minute; actor.Never keeps idle keys active.
	IdleTimeout time.Duration

	// AskTimeout bounds asks whose context has no deadline, for
	// definitions that do not set their own. Default 10 s.
	AskTimeout time.Duration

	// BackoffMin and BackoffMax bound the restart delay after a failure
	// (doubling per consecutive failure), for definitions that do not set
	// their own. Defaults 100 ms and 10 s.
	BackoffMin, BackoffMax time.Duration

	// Linger is how long an actor's goroutine waits for more work before
	// leaving the actor idle (it exits after one to two Linger periods).
	// Default 10 ms.
	Linger time.Duration

	// Cluster, when set, makes the system a member of a cluster (start it
	// with Start): keys are placed on the members by consistent hashing
	// and refs reach them wherever they live. Its ActorTypes are filled
	// from Actors. A Bind or Advertise port of 0 picks a free port, which
	// Addr reports. Nil: an embedded system, alone in this process.
	Cluster *cluster.Config

	// Listener, if set, is where a cluster member accepts connections,
	// instead of a listener on Cluster.Bind (socket activation, network
	// namespaces in tests). Its address is the default Advertise.
	Listener net.Listener

	// Dialer, if set, opens a cluster member's outgoing connections.
	Dialer wire.Dialer

	// MaxMessage bounds a message (and a reply) in a cluster, in bytes
	// of its msgpack encoding; a message over it fails with
	// actor.ErrMessageTooLarge wherever its key lives: a member measures
	// the messages to its own keys, and its replies to its own askers,
	// too. A standalone system encodes nothing and has no limit. Every
	// member and client of a cluster must use the same value (the
	// transport's handshake refuses a peer with another). Default
	// actor.DefaultMaxMessage (16 MiB); at most MaxMessageLimit (1 GiB).
	MaxMessage int

	// Compression is what a cluster member offers its peers for the
	// messages it sends; see wire.Compression. Default: s2, then zstd,
	// for chunks of 1 KiB or more.
	Compression wire.Compression

	// DataDir is the directory where this node stores the state of its
	// Durable and replicated actors (a badger database, with an on-disk
	// format version checked on open: a store of a newer format refuses to
	// open). A restarted process with the same DataDir recovers its copies.
	// Empty: the state lives in memory, for the life of the System
	// (tests, embedded use). One System at a time may use a directory.
	DataDir string

	// StrictDurability admits every message of the Durable and replicated
	// actors this system hosts as actor.StrictDurability does for one
	// definition: only once its key's write level is met for it, before
	// the handler runs; otherwise it fails with actor.ErrNotAdmitted and
	// does not run.
	StrictDurability bool

	// KeptAnswers bounds the answers this member keeps for keyed asks
	// (actor.WithIdempotencyKey) to its Durable and replicated actors,
	// across all of them: answers past KeptAnswers.Retain, and past a
	// bound the oldest, are dropped from their keys' records (see
	// replication.KeptAnswers). Zero fields take the defaults.
	KeptAnswers replication.KeptAnswers

	// TombstoneAge is how long the tombstone that Context.Delete leaves
	// stays before the member that owns the key collects it: every
	// replica of the key stores it again, then erases the key's records,
	// keeping only its promise with a horizon that voids any older copy
	// (docs/replication.md, "Collecting tombstones"). A key written again
	// meanwhile is not collected. Zero means 48 h (seed 000's retention);
	// negative keeps tombstones for good.
	TombstoneAge time.Duration

	// Sync makes the store fsync each batch of writes (group commit)
	// before they are acknowledged, so that an acknowledged state survives
	// a power loss, even of the whole cluster. Without it a write survives
	// the process's crash (it is in the operating system's cache) but not a
	// power loss of its machine, which may lose acknowledged writes at
	// every level (see package replication). Needs DataDir.
	Sync bool

	// CatchUpRate is the most bytes per second this member copies stored
	// state at when it catches up (the ranges it became a replica of, or
	// its store after it lost its last writes), so that application
	// traffic keeps flowing meanwhile. Default 32 MiB/s; negative: no
	// limit. It copies in chunks of 1 MiB, or of a thirty-second of the
	// rate when that is less (at least 64 KiB): at a lower rate each
	// chunk's burst of work is shorter, and so is the wait of the asks
	// behind it (BENCHMARKS.md, the hand-off rows).
	CatchUpRate int

	// LeaveTimeout bounds how long Close waits, in a cluster, for the
	// keys of this node to drain before it leaves (their later messages
	// go to the new owners). Default 30 s.
	LeaveTimeout time.Duration

	// Metrics, if set, is the Prometheus registry the system registers
	// its metrics on (troupe_*: see docs/operations.md), collected at
	// scrape time from its counters; tells and asks by type and outcome
	// and ask durations the runtime counts as messages go, at a cost
	// docs/operations.md measures. Never the global default registry
	// unless passed here. One system per registry (wrap it with
	// prometheus.WrapRegistererWith to put several on one). Close
	// unregisters them. Nil: no metrics.
	Metrics prometheus.Registerer

	// Tracer, if set, is called around every message a handler of this
	// system handles, with the message's W3C trace context (see
	// actor.WithTraceContext), and gives the handler its own: the hook
	// for an OpenTelemetry adapter (see actor.Tracer). It must be fast
	// and must not block. Trace contexts travel with tells and asks
	// whether it is set or not. Nil: none is called, at no cost.
	Tracer actor.Tracer

	// Records, if set, is the node record store a cluster member
	// publishes its record to, once a RecordTimings.Heartbeat, and reads
	// the cluster's records from (/api/v1/records): a store every member
	// shares, such as etcdrecords, so that each sees what every process
	// published. A call that fails or takes over 2 s fails the
	// readiness check "records" until a heartbeat succeeds again, and
	// the API answers 503. The system does not close it. Nil: each
	// member keeps an in-process store that holds its own record and
	// those it derives from its membership view for the others (address,
	// incarnation, status; no counters); it never fails. See
	// docs/records.md. Only for a cluster member.
	Records noderecord.Store

	// RecordTimings are the node records' heartbeat, unhealthy and lease
	// times. Zero fields take noderecord.DefaultTimings (5 s, 15 s, 30 s);
	// Validate requires Heartbeat < UnhealthyAfter < LeaseTTL.
	RecordTimings noderecord.Timings

	// RecordLabels are the labels this member's node record carries:
	// where it runs (region, zone, host), for operators and for the
	// API's label filters (/api/v1/members?label=zone=a). At most 16,
	// keys up to 63 bytes, values up to 256 (noderecord.ValidateLabels);
	// no secrets: every reader of the records sees them. The system
	// copies the map. Nil: none. Only for a cluster member.
	RecordLabels map[string]string

	// Admin, if set, opens the administration listener: health,
	// readiness and metrics over HTTP, each switched on by its own
	// field. Nil: no listener.
	Admin *AdminConfig
}

// Default values applied for zero Config fields.
const (
	DefaultIdleTimeout  = actor.DefaultIdleTimeout
	DefaultAskTimeout   = actor.DefaultAskTimeout
	DefaultBackoffMin   = actor.DefaultBackoffMin
	DefaultBackoffMax   = actor.DefaultBackoffMax
	DefaultLinger       = 10 * time.Millisecond
	DefaultLeaveTimeout = 30 * time.Second
	DefaultMaxMessage   = actor.DefaultMaxMessage
	// MaxMessageLimit bounds MaxMessage.
	MaxMessageLimit = actor.MaxMessageLimit
)

// defaultTombstoneAge is Config.TombstoneAge's default.
const defaultTombstoneAge = 48 * time.Hour

// Validate reports every problem with cfg: negative or inconsistent
// durations, nil, invalid or duplicate definitions. The error names the
// field or the definition.
func (cfg Config) Validate() error {
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"IdleTimeout", cfg.IdleTimeout}, {"AskTimeout", cfg.AskTimeout}, {"BackoffMin", cfg.BackoffMin},
		{"BackoffMax", cfg.BackoffMax}, {"Linger", cfg.Linger}, {"LeaveTimeout", cfg.LeaveTimeout}} {
		if f.d < 0 && (f.name != "IdleTimeout" || f.d != actor.Never) {
			bad(f.name, "%v is negative", f.d)
		}
	}
	if cfg.MaxMessage < 0 || cfg.MaxMessage > MaxMessageLimit {
		bad("MaxMessage", "%d bytes out of range [0, %d]", cfg.MaxMessage, MaxMessageLimit)
	}
	if err := cfg.Compression.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: Compression: %w", ErrInvalidConfig, err))
	}
	if err := (replication.Config{DataDir: cfg.DataDir, Sync: cfg.Sync}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	if cfg.Cluster != nil {
		if err := cfg.Cluster.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: Cluster: %w", ErrInvalidConfig, err))
		}
	}
	if cfg.Admin != nil {
		errs = append(errs, cfg.Admin.validate(cfg.Metrics)...)
	}
	if err := cfg.RecordTimings.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: RecordTimings: %w", ErrInvalidConfig, err))
	}
	if err := cfg.KeptAnswers.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: KeptAnswers: %w", ErrInvalidConfig, err))
	}
	if cfg.Records != nil && cfg.Cluster == nil {
		bad("Records", "only a cluster member publishes node records: set Cluster too")
	}
	if len(cfg.RecordLabels) > 0 && cfg.Cluster == nil {
		bad("RecordLabels", "only a cluster member publishes node records: set Cluster too")
	}
	if err := noderecord.ValidateLabels(cfg.RecordLabels); err != nil {
		errs = append(errs, fmt.Errorf("%w: RecordLabels: %w", ErrInvalidConfig, err))
	}
	if cfg.Cluster != nil {
		if err := noderecord.ValidateCluster(cfg.Cluster.WithDefaults().ClusterName); err != nil {
			errs = append(errs, fmt.Errorf("%w: Cluster.ClusterName: names the node records' key: %w", ErrInvalidConfig, err))
		}
	}
	c := cfg.withDefaults()
	if c.BackoffMax < c.BackoffMin {
		bad("BackoffMax", "%v is below BackoffMin %v", c.BackoffMax, c.BackoffMin)
	}
	seen := make(map[string]int)
	for i, d := range cfg.Actors {
		if d == nil {
			bad(fmt.Sprintf("Actors[%d]", i), "nil definition")
			continue
		}
		check := d.Err
		if cfg.Cluster != nil {
			check = d.ClusterErr
		}
		if err := check(); err != nil {
			errs = append(errs, fmt.Errorf("troupe: Actors[%d]: %w", i, err))
		}
		if j, dup := seen[d.Name()]; dup {
			errs = append(errs, fmt.Errorf("%w: %q is Actors[%d] and Actors[%d]", ErrDuplicateActor, d.Name(), j, i))
			continue
		}
		seen[d.Name()] = i
	}
	return errors.Join(errs...)
}

func (cfg Config) withDefaults() Config {
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.AskTimeout == 0 {
		cfg.AskTimeout = DefaultAskTimeout
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.LeaveTimeout == 0 {
		cfg.LeaveTimeout = DefaultLeaveTimeout
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.TombstoneAge == 0 {
		cfg.TombstoneAge = defaultTombstoneAge
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}
