package wire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Defaults for Config durations.
const (
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultKeepaliveAfter   = 15 * time.Second
	DefaultKeepaliveTimeout = 5 * time.Second
	DefaultRedialMin        = 100 * time.Millisecond
	DefaultRedialMax        = 15 * time.Second
	DefaultNotSentLowat     = 16 << 10
	DefaultSendQueue        = 64 << 20
)

// Dialer opens connections. *net.Dialer satisfies it; tests pass
// in-memory or fault-injecting dialers.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// TLS configures mutual TLS. Every connection then runs TLS 1.3, both
// sides present a certificate, and each verifies the other's chain against
// the cluster CA. Host names are not checked: membership of the cluster is
// possession of a certificate the cluster CA signed, and AddressMap may
// make the dialed name differ from any name in the certificate.
type TLS struct {
	// CA is the pool of cluster CA certificates. Required.
	CA *x509.CertPool
	// Certificate is this node's certificate chain and key, used both
	// as server and as client certificate. Required.
	Certificate tls.Certificate
}

func (t *TLS) validate() error {
	if t.CA == nil {
		return errors.New("troupe: Config.TLS.CA is nil")
	}
	if len(t.Certificate.Certificate) == 0 || t.Certificate.PrivateKey == nil {
		return errors.New("troupe: Config.TLS.Certificate has no certificate or key")
	}
	return nil
}

// Config configures the member-to-member transport. The zero value of every field except
// ClusterName means its default.
type Config struct {
	// ClusterName must be equal on both sides of every connection.
	// Required.
	ClusterName string
	// Advertise is the address, host:port, other nodes dial to reach
	// this node, and half of its ring.NodeID. Empty for a client, which
	// only dials out.
	Advertise string
	// Incarnation identifies this process lifetime; it must change on
	// every restart. Default: the wall clock in nanoseconds at New.
	Incarnation uint64
	// Limits on frames, envelopes and stream credit; see Limits for
	// units and defaults. Must agree with every peer.
	Limits Limits
	// Compression offered to peers; see Compression.
	Compression Compression
	// TLS enables mutual TLS. Nil means plaintext, for tests and
	// trusted links only.
	TLS *TLS
	// AddressMap translates an advertised address into the address to
	// dial, for NAT and tunnels. Applied at every dial; addresses not in
	// the map are dialed as advertised. Default: empty.
	AddressMap map[string]string
	// HandshakeTimeout bounds a handshake, TLS included. Default 5 s.
	HandshakeTimeout time.Duration
	// KeepaliveAfter is the silence, in time, after which a ping is
	// sent. Default 15 s.
	KeepaliveAfter time.Duration
	// KeepaliveTimeout is how long to wait for any bytes after a ping
	// before the connection is given up. Default 5 s.
	KeepaliveTimeout time.Duration
	// RedialMin and RedialMax bound the backoff between redials after a
	// failed dial; each wait is jittered. Defaults 100 ms and 15 s.
	RedialMin time.Duration
	RedialMax time.Duration
	// NotSentLowat, in bytes, is set as TCP_NOTSENT_LOWAT on TCP
	// sockets, so the kernel holds little unsent data and what is sent
	// next does not queue behind it. On fast paths the writer raises it
	// to about one large frame (FrameTime, 250 µs, at the sustained
	// rate), which a small envelope may wait behind anyway, and to 1 ms
	// at that rate (at most 4 MiB) after 50 ms in which only large
	// envelopes were written; this value is the floor. Default 16 KiB;
	// negative leaves the socket as it is.
	NotSentLowat int
	// SendQueue bounds, in bytes per peer, the envelopes queued and not
	// yet fully written; a send beyond it fails with ErrQueueFull.
	// Default 64 MiB; at least Limits.MaxMessage.
	SendQueue int
	// Dialer opens outgoing connections. Default: a *net.Dialer.
	Dialer Dialer
	// Logger receives connection events. Nil discards them.
	Logger *slog.Logger
}

// Validate reports the first field that is missing or out of range.
func (c *Config) Validate() error {
	if c.ClusterName == "" {
		return errors.New("troupe: Config.ClusterName is empty")
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if err := c.Compression.Validate(); err != nil {
		return err
	}
	if c.TLS != nil {
		if err := c.TLS.validate(); err != nil {
			return err
		}
	}
	for name, d := range map[string]time.Duration{
		"HandshakeTimeout": c.HandshakeTimeout,
		"KeepaliveAfter":   c.KeepaliveAfter,
		"KeepaliveTimeout": c.KeepaliveTimeout,
		"RedialMin":        c.RedialMin,
		"RedialMax":        c.RedialMax,
	} {
		if d < 0 {
			return fmt.Errorf("troupe: Config.%s %v is negative", name, d)
		}
	}
	if c.SendQueue != 0 && c.SendQueue < c.Limits.withDefaults().MaxMessage {
		return fmt.Errorf("troupe: Config.SendQueue %d below Limits.MaxMessage", c.SendQueue)
	}
	if c.RedialMax != 0 && c.RedialMin > c.RedialMax {
		return fmt.Errorf("troupe: Config.RedialMin %v above RedialMax %v", c.RedialMin, c.RedialMax)
	}
	if c.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
			return fmt.Errorf("troupe: Config.Advertise: %w", err)
		}
	}
	return nil
}
