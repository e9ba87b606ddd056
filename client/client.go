package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/internal/membership"
	"github.com/troupe-go/troupe/internal/metrics"
	"github.com/troupe-go/troupe/internal/remote"
	"github.com/troupe-go/troupe/internal/runtime"
	"github.com/troupe-go/troupe/internal/transport"
	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
)

// Config configures a Client.
type Config struct {
	// ClusterName must match the cluster's. Default "troupe".
	ClusterName string
	// Seeds are host:port addresses of members to learn the cluster from.
	// Required.
	Seeds []string
	// TLS enables mutual TLS, as on the members. Nil: plain TCP.
	TLS *wire.TLS
	// AddressMap translates members' advertised addresses into dialable
	// ones (NAT, tunnels).
	AddressMap map[string]string
	// Dialer opens the client's connections. Default: a *net.Dialer.
	Dialer wire.Dialer
	// SyncInterval is how often the client asks the members it follows
	// for the member list, besides the pushes they send when it changes
	// (a member whose list is the one it last sent answers with a few
	// bytes). Default 5 s; the client asks at least every 20 s whatever
	// it says, since a member stops pushing to a client a minute after
	// its last request.
	SyncInterval time.Duration
	// AskTimeout bounds asks whose context has no deadline, for
	// definitions that do not set their own. Default 10 s.
	AskTimeout time.Duration
	// Silence is how long a member's connection may carry nothing before
	// the client sends through another member instead (see the package
	// comment). The connection is pinged after two thirds of it, so a
	// live one is never that quiet. Default DefaultSilence; negative:
	// never relay (and the transport's default keepalive).
	Silence time.Duration
	// MaxMessage bounds a message (and a reply), in bytes of its msgpack
	// encoding: a message over it fails with actor.ErrMessageTooLarge.
	// It must be the cluster's (system.Config.MaxMessage): the
	// transport's handshake refuses a client with another. Default
	// actor.DefaultMaxMessage (16 MiB); at most actor.MaxMessageLimit
	// (1 GiB).
	MaxMessage int
	// Compression is what the client offers the members for the messages
	// it sends; see wire.Compression. Default: s2, then zstd.
	Compression wire.Compression
	// Logger receives connection problems. Nil discards them.
	Logger *slog.Logger
	// Metrics, if set, is where the client registers its troupe_*
	// metrics (New fails if it cannot, with the registry's error, such
	// as a prometheus.AlreadyRegisteredError for a second client on one
	// registry); Close unregisters them. Nil: no metrics, and a message
	// pays one nil check. Never the global default registry unless it is
	// passed here. docs/operations.md lists the series.
	Metrics prometheus.Registerer
	// JoinTimeout bounds how long New waits for the first member list,
	// whatever its context allows: past it New fails with a
	// *cluster.JoinError naming each seed's last error. New fails at once
	// when every seed refuses the handshake. Default 30 s
	// (cluster.DefaultJoinTimeout).
	JoinTimeout time.Duration
}

// Defaults.
const (
	DefaultSyncInterval = 5 * time.Second
	// DefaultSilence matches the members' own (cluster.Config.WireSilence
	// with the default timings).
	DefaultSilence = 7500 * time.Millisecond
)

// followed is how many members at a time push the member list to the
// client: one push, from any member that survives, is enough to learn of
// a death, so a single one (the seed) would leave the client blind for a
// SyncInterval when it is the member that died. Each more costs every
// member-list change one more message to each client.
const followed = 3

// resyncMax bounds the interval between syncs to a followed member: a
// member pushes to a client for a minute after its last sync
// (remote.clientExpiry).
const resyncMax = 20 * time.Second

// ErrInvalidConfig reports a Config that New rejects.
var ErrInvalidConfig = errors.New("troupe: invalid client config")

// Client is a non-member connection to a cluster.
type Client struct {
	handle // makes a *Client an actor.System
	cfg    Config
	h      *host.Host
	tr     *transport.Transport
	router *remote.Router

	// apply serialises onMembers, which hands a list to the router
	// before Members shows it: once a caller sees a member dead, no ask
	// goes to it.
	apply   sync.Mutex
	mu      sync.Mutex
	members []cluster.Member
	seen    map[ring.NodeID]time.Time // when a list last named each member
	learned chan struct{}             // closed at the first member list
	once    sync.Once
	// changed wakes the loop when a member list arrived, to replace
	// followed members that are no longer alive at once.
	changed chan struct{}
	lists   uint64 // member lists received, under mu

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	// unregister removes the metrics from Config.Metrics; nil without.
	unregister func()
}

func (cfg Config) validate() error {
	if len(cfg.Seeds) == 0 {
		return fmt.Errorf("%w: Seeds is empty", ErrInvalidConfig)
	}
	for i, s := range cfg.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("%w: Seeds[%d]: %v", ErrInvalidConfig, i, err)
		}
	}
	if cfg.SyncInterval < 0 || cfg.AskTimeout < 0 || cfg.JoinTimeout < 0 {
		return fmt.Errorf("%w: negative SyncInterval, AskTimeout or JoinTimeout", ErrInvalidConfig)
	}
	if cfg.MaxMessage < 0 || cfg.MaxMessage > actor.MaxMessageLimit {
		return fmt.Errorf("%w: MaxMessage %d out of range [0, %d]", ErrInvalidConfig, cfg.MaxMessage, actor.MaxMessageLimit)
	}
	if err := cfg.Compression.Validate(); err != nil {
		return fmt.Errorf("%w: Compression: %w", ErrInvalidConfig, err)
	}
	return nil
}

// New connects to the cluster through cfg.Seeds and waits for the first
// member list, or until ctx ends.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "troupe"
	}
	if cfg.SyncInterval == 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Silence == 0 {
		cfg.Silence = DefaultSilence
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = actor.DefaultMaxMessage
	}
	if cfg.JoinTimeout == 0 {
		cfg.JoinTimeout = cluster.DefaultJoinTimeout
	}
	started := time.Now()
	wcfg := wire.Config{ClusterName: cfg.ClusterName, Incarnation: uint64(time.Now().UnixNano()),
		TLS: cfg.TLS, AddressMap: cfg.AddressMap, Dialer: cfg.Dialer, Logger: cfg.Logger,
		Limits: remote.WireLimits(cfg.MaxMessage), Compression: cfg.Compression}
	var silence time.Duration
	if cfg.Silence > 0 {
		// Pinged after two thirds of the silence, a live connection
		// answers well before it counts as broken.
		silence = cfg.Silence
		wcfg.KeepaliveAfter = silence * 2 / 3
		wcfg.KeepaliveTimeout = silence * 2 / 3
	}
	tr, err := transport.New(wcfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	c := &Client{cfg: cfg, tr: tr, learned: make(chan struct{}), changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.router = remote.New(remote.Config{Endpoint: tr, Logger: cfg.Logger, OnMembers: c.onMembers, Silence: silence})
	settings := host.Settings{Logger: cfg.Logger, AskTimeout: cfg.AskTimeout, Remote: c.router, RemoteOnly: true, MaxMessage: cfg.MaxMessage}
	var met *metrics.Meters
	if cfg.Metrics != nil {
		met = new(metrics.Meters)
		settings.Meter = met.TypeMeter
	}
	c.h = host.New(settings)
	c.router.SetHost(c.h)
	c.handle = runtime.NewHandle(c.h)
	if err := c.startMetrics(started, met); err != nil {
		close(c.done) // no loop to wait for
		c.Close()
		return nil, fmt.Errorf("troupe: client: register the metrics: %w", err)
	}
	c.syncSeeds()
	go c.loop()
	if err := c.awaitList(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("troupe: client: learn the cluster: %w", err)
	}
	return c, nil
}

// refusalPoll is how often New looks whether every seed refused it.
const refusalPoll = 20 * time.Millisecond

// awaitList waits for the first member list, until ctx ends, the join
// timeout passes or every seed refused the handshake.
func (c *Client) awaitList(ctx context.Context) error {
	select {
	case <-c.learned:
		return nil
	default:
	}
	timeout := time.NewTimer(c.cfg.JoinTimeout)
	defer timeout.Stop()
	poll := time.NewTicker(refusalPoll)
	defer poll.Stop()
	for {
		select {
		case <-c.learned:
			return nil
		case <-ctx.Done():
			return membership.JoinFailure(ctx.Err(), c.cfg.Seeds, c.tr)
		case <-timeout.C:
			return membership.JoinFailure(membership.ErrJoinTimeout, c.cfg.Seeds, c.tr)
		case <-poll.C:
			if membership.AllRefused(c.cfg.Seeds, c.tr) {
				return membership.JoinFailure(membership.ErrJoinRefused, c.cfg.Seeds, c.tr)
			}
		}
	}
}

// handle is the runtime's handle on the client.
type handle = runtime.Handle

// Members returns the cluster's current members as the client last
// learned them: one record per address, of the newest process there,
// sorted by NodeID. Members that left and the older processes of a
// restarted member are not listed; a member whose record says Joining
// gets no keys yet.
func (c *Client) Members() []cluster.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return membership.Current(c.members)
}

// PlacementVersion returns the placement version of the client's view:
// an opaque token of each actor type's ring membership and of which ring
// members do not serve, equal to the placement_version of a member's
// admin API (/api/v1/placement) that sees the same placement. Compare it
// for equality only. It is "" before the first member list.
func (c *Client) PlacementVersion() string { return c.router.PlacementVersion() }

// onMembers merges a member list from a member into the client's view.
// A record both know is kept at its later state. A member the list does
// not name stays for two sync intervals after a list last named it: the
// sender may simply not have heard of it yet (right after it joined).
func (c *Client) onMembers(_ ring.NodeID, ms []cluster.Member) {
	c.apply.Lock()
	defer c.apply.Unlock()
	now := time.Now()
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[ring.NodeID]time.Time{}
	}
	old := make(map[ring.NodeID]cluster.Member, len(c.members))
	for _, m := range c.members {
		old[m.ID] = m
	}
	merged := make([]cluster.Member, 0, len(ms)+len(c.members))
	named := make(map[ring.NodeID]bool, len(ms))
	for _, m := range ms {
		if o, ok := old[m.ID]; ok && (o.Incarnation > m.Incarnation || (o.Incarnation == m.Incarnation && o.Status > m.Status)) {
			m = o
		}
		named[m.ID] = true
		c.seen[m.ID] = now
		merged = append(merged, m)
	}
	for _, m := range c.members {
		if !named[m.ID] && now.Sub(c.seen[m.ID]) < 2*c.cfg.SyncInterval {
			merged = append(merged, m)
		}
	}
	for id, at := range c.seen {
		if now.Sub(at) >= 2*c.cfg.SyncInterval && !named[id] {
			delete(c.seen, id)
		}
	}
	slices.SortFunc(merged, func(a, b cluster.Member) int { return a.ID.Compare(b.ID) })
	c.mu.Unlock()
	c.router.Update(ring.NodeID{}, true, merged)
	c.mu.Lock()
	c.members = merged
	c.lists++
	c.mu.Unlock()
	c.once.Do(func() { close(c.learned) })
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// syncSeeds asks every seed for the member list.
func (c *Client) syncSeeds() {
	for _, s := range c.cfg.Seeds {
		if err := c.router.Sync(ring.NodeID{Addr: s}); err != nil {
			c.cfg.Logger.Debug("troupe: client: sync", "seed", s, "err", err)
		}
	}
}

// loop follows up to `followed` alive members: it syncs with each every
// SyncInterval, which also keeps their pushes coming, and replaces one
// that is no longer alive as soon as a member list says so. Should no
// list arrive between two ticks, the followed members are gone although
// no list said so (they died together): it follows others. With none
// known alive it asks the seeds.
func (c *Client) loop() {
	defer close(c.done)
	t := time.NewTicker(min(c.cfg.SyncInterval, resyncMax))
	defer t.Stop()
	var follow []ring.NodeID
	var heard uint64 // c.lists at the last tick
	for {
		tick := false
		select {
		case <-c.stop:
			return
		case <-t.C:
			tick = true
		case <-c.changed:
		}
		c.mu.Lock()
		var alive []ring.NodeID
		for _, m := range c.members {
			if m.Status == cluster.StatusAlive {
				alive = append(alive, m.ID)
			}
		}
		silent := tick && c.lists == heard
		if tick {
			heard = c.lists
		}
		c.mu.Unlock()
		var added []ring.NodeID
		follow, added = refollow(follow, alive, silent, rand.IntN(max(len(alive), 1)))
		if len(follow) == 0 {
			if tick {
				c.syncSeeds()
			}
			continue
		}
		ask := added
		if tick {
			ask = follow
		}
		for _, id := range ask {
			if err := c.router.Sync(id); err != nil {
				c.cfg.Logger.Debug("troupe: client: sync", "member", id, "err", err)
			}
		}
	}
}

// refollow returns the members to follow: those of follow still alive
// (none if they fell silent), and more of alive, taken in turn from
// start, up to `followed` (never one that fell silent); added lists the
// new ones.
func refollow(follow, alive []ring.NodeID, silent bool, start int) (next, added []ring.NodeID) {
	if silent {
		alive = slices.DeleteFunc(slices.Clone(alive), func(id ring.NodeID) bool { return slices.Contains(follow, id) })
		follow = nil
	}
	for _, id := range follow {
		if slices.Contains(alive, id) {
			next = append(next, id)
		}
	}
	for i := range alive {
		if len(next) == followed {
			break
		}
		id := alive[(start+i)%len(alive)]
		if !slices.Contains(next, id) {
			next = append(next, id)
			added = append(added, id)
		}
	}
	return next, added
}

// Close fails the asks still waiting with actor.ErrSystemClosed and closes
// the connections. It is safe to call more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.router.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.h.Close(ctx)
		cancel()
		c.tr.Close()
		if c.unregister != nil {
			c.unregister()
		}
	})
	return nil
}
