package system

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/admin"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/metrics"
	"github.com/troupe-go/troupe/internal/runtime"
)

// System hosts actors in this process. It is safe for concurrent use.
type System struct {
	handle // makes a *System an actor.System
	h      *host.Host
	m      *member // nil for an embedded system
	st     *states // nil when no definition keeps state
	stOnce sync.Once

	// started is when the system started (the API's uptime).
	started time.Time

	// closing is set when Close starts: readiness fails from then on.
	closing atomic.Bool
	// admin is the admin listener (nil without one); unregister removes
	// the metrics from Config.Metrics (nil without them).
	admin      *admin.Server
	unregister func()
	adminOnce  sync.Once
	// met holds the metrics the runtime updates as it goes (nil without
	// Config.Metrics); the collector reports them with the rest.
	met *metrics.Meters
}

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds.
const (
	ActivationStarted EventKind = iota + 1
	ActivationEnded
	ActivationFailed
	MessageDropped
	MailboxFull
)

// eventKind is the kind of a runtime event.
func eventKind(k host.EventKind) EventKind {
	switch k {
	case host.ActivationStarted:
		return ActivationStarted
	case host.ActivationEnded:
		return ActivationEnded
	case host.ActivationFailed:
		return ActivationFailed
	case host.MessageDropped:
		return MessageDropped
	case host.MailboxFull:
		return MailboxFull
	}
	return 0
}

func (k EventKind) String() string {
	switch k {
	case ActivationStarted:
		return "activation-started"
	case ActivationEnded:
		return "activation-ended"
	case ActivationFailed:
		return "activation-failed"
	case MessageDropped:
		return "message-dropped"
	case MailboxFull:
		return "mailbox-full"
	}
	return "unknown"
}

// Event is one observation the runtime reports to Config.Observer.
type Event struct {
	Kind  EventKind
	Actor actor.ID
	// Reason explains ends and drops ("idle", "released", ...).
	Reason string
	// Err is the failure, for ActivationFailed.
	Err error
}

// Stats is a snapshot of the runtime's load.
type Stats struct {
	// Active is the number of activated keys (idle ones included).
	Active int
	// Queued is the number of messages waiting in mailboxes.
	Queued int
	// DeepestMailbox is the longest mailbox.
	DeepestMailbox int
	// AsksInFlight is the number of asks waiting for a reply.
	AsksInFlight int
	// Restarts counts failures that restarted an actor or its body.
	Restarts int64
	// Rejoins counts the times a cluster member, removed by the cluster
	// (see System.Removed), rejoined with a new incarnation. Each rejoin
	// is also logged at Warn.
	Rejoins int64
	// Receiving is nonzero while this member is still receiving ranges
	// of the ring: it became one of their replicas (or its store lost
	// its last writes) and does not count toward their quorums until it
	// has caught them up from the others. It is the number of such
	// ranges (adjacent ones merged; the whole ring is one), or of
	// hand-offs under way if more.
	Receiving int
	// ReceivedBytes counts the bytes of stored state (and of the indexes
	// that say which state it lacks) this member received from other
	// members catching up, since it started.
	ReceivedBytes int64
}

// New starts a system hosting cfg.Actors. It fails if cfg does not
// validate.
func New(cfg Config) (*System, error) {
	if cfg.Cluster != nil {
		return nil, fmt.Errorf("%w: Cluster is set: start a cluster member with Start, which joins it", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var st *states
	if durableTypes(cfg.Actors) {
		var err error
		if st, err = openStates(cfg, cfg.withDefaults().Logger); err != nil {
			return nil, err
		}
		// The only replica of every key is this node: nothing is sent.
		if err := st.attach(context.Background(), newLocalEndpoint()); err != nil {
			st.store.Close()
			return nil, fmt.Errorf("troupe: open the store: %w", err)
		}
	}
	s := newSystem(cfg, nil, st)
	if err := s.startAdmin(cfg); err != nil {
		s.Close(context.Background())
		return nil, err
	}
	return s, nil
}

// newSystem builds the runtime of a validated cfg; rem, if not nil, places
// keys across the cluster; st, if not nil, keeps durable state.
func newSystem(cfg Config, rem host.Remote, st *states) *System {
	c := cfg.withDefaults()
	settings := host.Settings{
		Logger: c.Logger, IdleTimeout: c.IdleTimeout, AskTimeout: c.AskTimeout,
		BackoffMin: c.BackoffMin, BackoffMax: c.BackoffMax, Linger: c.Linger, Remote: rem,
		Kept: c.KeptAnswers,
	}
	if st != nil {
		settings.Store, settings.Strict = st, c.StrictDurability
	}
	if rem != nil {
		settings.MaxMessage = c.MaxMessage
		settings.Member = c.Cluster.Advertise // fixed by Start before it builds the system
	}
	if obs := cfg.Observer; obs != nil {
		settings.Observer = func(e host.Event) {
			obs(Event{Kind: eventKind(e.Kind), Actor: actor.ID{Type: e.Type, Key: e.Key}, Reason: e.Reason, Err: e.Err})
		}
	}
	if tr := cfg.Tracer; tr != nil {
		settings.Tracer = func(ctx context.Context, m host.Handling) (host.Trace, func(error)) {
			t, end := tr.Handle(ctx, actor.Handling(m))
			return host.Trace(t), end
		}
	}
	var met *metrics.Meters
	if cfg.Metrics != nil {
		met = new(metrics.Meters)
		settings.Meter = met.TypeMeter
	}
	h := host.New(settings)
	for _, d := range cfg.Actors {
		h.Register(runtime.Instantiate(d, h))
	}
	if st != nil {
		st.setHost(h)
	}
	return &System{handle: runtime.NewHandle(h), h: h, st: st, started: time.Now(), met: met}
}

// handle is the runtime's handle on the system.
type handle = runtime.Handle

// Close stops the system: new messages fail with actor.ErrSystemClosed,
// activations drain their mailboxes until ctx ends, then running handlers
// are cancelled and what is still queued fails. Timers stop. Close waits
// for every goroutine the runtime started; it returns ctx's error when the
// deadline cut work short. Calling Close again returns nil.
//
// A cluster member first leaves: placement stops sending it keys, and
// what is queued drains for up to Config.LeaveTimeout (a *LeaveError
// reports what was still queued); then the runtime closes as above and
// the transport says goodbye.
//
// The admin listener, if any, answers until the end, not ready from the
// start of Close on; Close then closes it and unregisters the metrics.
func (s *System) Close(ctx context.Context) error {
	s.closing.Store(true)
	defer s.stopAdmin(ctx)
	if s.m != nil {
		return s.closeMember(ctx, s.h.Close)
	}
	err := s.h.Close(ctx)
	if s.st != nil {
		s.closeStates(ctx)
	}
	return err
}

// closeStates closes the store once the runtime closed: briefly, whatever
// ctx says, so that the node's loop has stopped and the store is closed
// (a DataDir is free for the next process) when Close returns.
func (s *System) closeStates(ctx context.Context) {
	s.stOnce.Do(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.st.close(cctx); err != nil {
			s.h.Logger.Warn("troupe: closing the store", "err", err)
		}
	})
}

// Stats returns a snapshot of the runtime's load.
func (s *System) Stats() Stats {
	st := Stats{
		Active:       int(s.h.Active.Load()),
		AsksInFlight: int(s.h.AsksOut.Load()),
		Restarts:     s.h.Restarts.Load(),
	}
	if s.m != nil {
		st.Rejoins = s.m.rejoins.Load()
	}
	if s.st != nil {
		st.Receiving, st.ReceivedBytes = s.st.receivingStats()
	}
	for _, k := range s.h.Kinds() {
		st.Queued += k.Queued()
		st.DeepestMailbox = max(st.DeepestMailbox, k.Deepest())
	}
	return st
}
