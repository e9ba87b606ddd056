package cluster

import (
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/troupe-go/troupe/wire"
)

// Timings are the failure detector and dissemination intervals. The zero
// value of each field means its default; DefaultTimings and FastTimings are
// the two presets.
type Timings struct {
	// Heartbeat is the period of pings to neighbours, of the probe of the
	// least-recently-heard non-neighbour, and of lazy gossip. Default 1 s.
	Heartbeat time.Duration
	// SuspectAfter is the silence after which an observer suspects a
	// member it watches. Must be at least 2×Heartbeat. Default 5 s.
	SuspectAfter time.Duration
	// DeadAfter is how long a suspicion lasts before observers declare the
	// member dead. A node that lost its majority steps down after
	// DeadAfter/2. Must be at least Heartbeat. Default 5 s.
	DeadAfter time.Duration
	// RemoveAfter is how long a dead member stays in the member set (and
	// the ring) before a node that sees a majority removes it (marks it
	// left). Must be at least DeadAfter. Default 1 min.
	RemoveAfter time.Duration
	// AntiEntropy is the period of the full table exchange with one random
	// member. Must be at least Heartbeat. Default 30 s.
	AntiEntropy time.Duration
	// TombstoneTTL is how long a left record is kept, so that anti-entropy
	// spreads it everywhere before it is forgotten, and the table stays
	// bounded. Must be at least 2×AntiEntropy. Default 5 min.
	TombstoneTTL time.Duration
}

// DefaultTimings returns the production preset: 1 s, 5 s, 5 s, 1 min, 30 s,
// with a 5 min tombstone TTL.
func DefaultTimings() Timings {
	return Timings{
		Heartbeat:    time.Second,
		SuspectAfter: 5 * time.Second,
		DeadAfter:    5 * time.Second,
		RemoveAfter:  time.Minute,
		AntiEntropy:  30 * time.Second,
		TombstoneTTL: 5 * time.Minute,
	}
}

// FastTimings returns a preset ten times faster than the default, for
// tests and single-machine clusters.
func FastTimings() Timings {
	return Timings{
		Heartbeat:    100 * time.Millisecond,
		SuspectAfter: 500 * time.Millisecond,
		DeadAfter:    500 * time.Millisecond,
		RemoveAfter:  6 * time.Second,
		AntiEntropy:  3 * time.Second,
		TombstoneTTL: 30 * time.Second,
	}
}

func (t Timings) withDefaults() Timings {
	d := DefaultTimings()
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&t.Heartbeat, d.Heartbeat)
	set(&t.SuspectAfter, d.SuspectAfter)
	set(&t.DeadAfter, d.DeadAfter)
	set(&t.RemoveAfter, d.RemoveAfter)
	set(&t.AntiEntropy, d.AntiEntropy)
	set(&t.TombstoneTTL, d.TombstoneTTL)
	return t
}

// Validate rejects negative and inconsistent timings, after defaults are
// applied to zero fields.
func (t Timings) Validate() error {
	t = t.withDefaults()
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"Timings.Heartbeat", t.Heartbeat}, {"Timings.SuspectAfter", t.SuspectAfter},
		{"Timings.DeadAfter", t.DeadAfter}, {"Timings.RemoveAfter", t.RemoveAfter},
		{"Timings.AntiEntropy", t.AntiEntropy}, {"Timings.TombstoneTTL", t.TombstoneTTL},
	} {
		if f.v < 0 {
			return &ConfigError{Field: f.name, Reason: "must not be negative"}
		}
	}
	switch {
	case t.SuspectAfter < 2*t.Heartbeat:
		return &ConfigError{Field: "Timings.SuspectAfter", Reason: "must be at least 2×Heartbeat, or one late heartbeat raises a suspicion"}
	case t.DeadAfter < t.Heartbeat:
		return &ConfigError{Field: "Timings.DeadAfter", Reason: "must be at least Heartbeat, or a suspect cannot refute in time"}
	case t.RemoveAfter < t.DeadAfter:
		return &ConfigError{Field: "Timings.RemoveAfter", Reason: "must be at least DeadAfter"}
	case t.AntiEntropy < t.Heartbeat:
		return &ConfigError{Field: "Timings.AntiEntropy", Reason: "must be at least Heartbeat"}
	case t.TombstoneTTL < 2*t.AntiEntropy:
		return &ConfigError{Field: "Timings.TombstoneTTL", Reason: "must be at least 2×AntiEntropy, or a forgotten tombstone can come back"}
	}
	return nil
}

// Config configures one cluster member. The zero value of every field
// means its default; Advertise (or a Bind with a specific host) is the
// only thing a real deployment must set.
type Config struct {
	// ClusterName must agree between members; the transport handshake
	// refuses peers of another cluster. Default "troupe".
	ClusterName string
	// Bind is the host:port the transport listens on. Default
	// "0.0.0.0:7400".
	Bind string
	// Advertise is the host:port peers use to reach this node, and half of
	// its ring.NodeID. Default: Bind, which then must name a specific host.
	Advertise string
	// Seeds are host:port addresses of first contacts. They are asked for
	// the table at join and never coordinate anything afterwards; the
	// node's own address may be among them (one list for every member).
	// A node whose seeds name other addresses never starts a cluster
	// alone: it waits, up to JoinTimeout, for one of them to answer or
	// to join it. Default none: the node starts a cluster of its own.
	//
	// Members started together need one founder: only a node with no
	// seeds besides itself, or the smallest address of a seed list that
	// names it, takes keys before it knows a member that does; the others
	// join and wait for one (up to JoinTimeout). So start every member
	// with the same list, its own address included, or start the first
	// with none: lists that each name only the others have no founder.
	Seeds []string
	// ActorTypes are the actor type names this node hosts, announced in
	// its record. Default none.
	ActorTypes []string
	// Timings of the failure detector; see Timings. Default DefaultTimings.
	Timings Timings
	// ActiveView is the number of neighbours (the HyParView active view)
	// this node pings each Heartbeat and gossips to. Default 5.
	ActiveView int
	// PassiveView is the number of known members kept as replacement
	// neighbours (the passive view). Default 30.
	PassiveView int
	// Confirmations is how many distinct observers must suspect a member
	// before it is declared dead, when that many other members are alive.
	// Default 2.
	Confirmations int
	// RetransmitMult is lambda in the gossip retransmission bound
	// lambda×ceil(log2(N+1)) sends per record. Default 2.
	RetransmitMult int
	// MaxPiggyback bounds the gossip records carried by one ping, ack or
	// gossip message. Default 32.
	MaxPiggyback int
	// LazyGossip, when set, sends gossip only with the periodic pings
	// instead of pushing new records to the neighbours at once. It exists
	// to measure dissemination in rounds. Default false.
	LazyGossip bool
	// RandSeed seeds the core's random choices (neighbours, anti-entropy
	// partners). Default 0: derived from the ring.NodeID, so runs replay.
	RandSeed uint64
	// TLS configures mutual TLS for the transport (see WireConfig): the
	// cluster CA and this node's certificate. The core does not use it.
	// Default nil: plain TCP.
	TLS *wire.TLS
	// AddressMap translates advertised addresses to dialable addresses
	// (NAT, tunnels); WireConfig hands it to the transport, which applies
	// it at every dial. The core always speaks in advertised addresses. Default nil: dial as advertised.
	AddressMap map[string]string
	// Logger receives membership changes at Info and protocol detail at
	// Debug. Default nil: discard.
	Logger *slog.Logger
	// JoinTimeout bounds how long a join through the seeds may take,
	// whatever the context of system.Start allows: past it the join fails
	// with a *JoinError listing each seed's last error. A join that every
	// seed refuses fails at once. Default 30 s.
	JoinTimeout time.Duration
}

// DefaultJoinTimeout is the JoinTimeout of a zero Config.
const DefaultJoinTimeout = 30 * time.Second

// DefaultConfig returns the production defaults, advertising addr.
func DefaultConfig(advertise string) Config {
	return Config{Advertise: advertise, Timings: DefaultTimings()}
}

// FastConfig returns a config with FastTimings, advertising addr.
func FastConfig(advertise string) Config {
	return Config{Advertise: advertise, Timings: FastTimings()}
}

// Limits the membership records impose on the fields they carry; the
// record codec enforces the same bounds (a test there checks they agree).
const (
	maxAddrLen      = 256 // bytes of an advertised address
	maxActorTypeLen = 256 // bytes of one actor type name
	maxAccusers     = 8   // accusers one record carries, so the most confirmations
)

// WithDefaults returns c with every zero field set to its default: the
// configuration a member actually runs with.
func (c Config) WithDefaults() Config {
	if c.ClusterName == "" {
		c.ClusterName = "troupe"
	}
	if c.Bind == "" {
		c.Bind = "0.0.0.0:7400"
	}
	if c.Advertise == "" {
		c.Advertise = c.Bind
	}
	c.Timings = c.Timings.withDefaults()
	if c.ActiveView == 0 {
		c.ActiveView = 5
	}
	if c.PassiveView == 0 {
		c.PassiveView = 30
	}
	if c.Confirmations == 0 {
		c.Confirmations = 2
	}
	if c.RetransmitMult == 0 {
		c.RetransmitMult = 2
	}
	if c.MaxPiggyback == 0 {
		c.MaxPiggyback = 32
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.JoinTimeout == 0 {
		c.JoinTimeout = DefaultJoinTimeout
	}
	return c
}

// Validate reports the first field that is wrong, as a *ConfigError
// wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := checkHostPort("Bind", c.Bind); err != nil {
		return err
	}
	if err := checkHostPort("Advertise", c.Advertise); err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(c.Advertise); host == "" || host == "0.0.0.0" || host == "::" {
		return &ConfigError{Field: "Advertise", Reason: "must name a host peers can dial; set it when Bind is a wildcard"}
	}
	if len(c.Advertise) > maxAddrLen {
		return &ConfigError{Field: "Advertise", Reason: "longer than 256 bytes"}
	}
	for i, s := range c.Seeds {
		if err := checkHostPort("Seeds["+strconv.Itoa(i)+"]", s); err != nil {
			return err
		}
	}
	for i, s := range c.ActorTypes {
		if s == "" || len(s) > maxActorTypeLen {
			return &ConfigError{Field: "ActorTypes[" + strconv.Itoa(i) + "]", Reason: "must be 1 to 256 bytes"}
		}
	}
	if err := c.Timings.Validate(); err != nil {
		return err
	}
	switch {
	case c.ActiveView < 1:
		return &ConfigError{Field: "ActiveView", Reason: "must be at least 1"}
	case c.PassiveView < 0:
		return &ConfigError{Field: "PassiveView", Reason: "must not be negative"}
	case c.Confirmations < 1:
		return &ConfigError{Field: "Confirmations", Reason: "must be at least 1"}
	case c.Confirmations > maxAccusers:
		return &ConfigError{Field: "Confirmations", Reason: "must be at most 8, the accusers a record carries"}
	case c.RetransmitMult < 1:
		return &ConfigError{Field: "RetransmitMult", Reason: "must be at least 1"}
	case c.MaxPiggyback < 1:
		return &ConfigError{Field: "MaxPiggyback", Reason: "must be at least 1"}
	case c.JoinTimeout < 0:
		return &ConfigError{Field: "JoinTimeout", Reason: "must not be negative"}
	}
	for from, to := range c.AddressMap {
		if err := checkHostPort("AddressMap["+from+"]", to); err != nil {
			return err
		}
	}
	return nil
}

func checkHostPort(field, s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return &ConfigError{Field: field, Reason: "must be host:port: " + err.Error()}
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return &ConfigError{Field: field, Reason: "port must be a number from 0 to 65535"}
	}
	return nil
}

// WireConfig returns the configuration of the transport that carries this
// membership: the same cluster name, advertised address, TLS, address map
// and logger, for the process incarnation given. The transport's own
// tuning (limits, compression) keeps its defaults; set it on the result.
// Listen on Bind and run the membership over that transport.
//
// Keepalive follows the timings: a connection silent for SuspectAfter is
// pinged, and given up SuspectAfter later. So a live link is never silent
// for much longer than SuspectAfter, whether or not membership talks on
// it, and a silence of 1.5 × SuspectAfter (WireSilence) means the link is
// broken: the actor layer then relays through another member.
func (c Config) WireConfig(incarnation uint64) wire.Config {
	d := c.WithDefaults()
	return wire.Config{
		ClusterName:      d.ClusterName,
		Advertise:        d.Advertise,
		Incarnation:      incarnation,
		TLS:              d.TLS,
		AddressMap:       d.AddressMap,
		Logger:           d.Logger,
		KeepaliveAfter:   d.Timings.SuspectAfter,
		KeepaliveTimeout: d.Timings.SuspectAfter,
	}
}

// WireSilence is how long a peer of a transport made by WireConfig can be
// silent (no byte heard) before its link counts as broken: the keepalive
// ping, sent after SuspectAfter of silence, would have been answered.
func (c Config) WireSilence() time.Duration {
	return c.WithDefaults().Timings.SuspectAfter * 3 / 2
}
