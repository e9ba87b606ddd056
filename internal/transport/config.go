package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/troupe-go/troupe/internal/transport/flow"
	"github.com/troupe-go/troupe/wire"
)

// verifyPeer checks the peer's chain against the cluster CA; host names are
// not checked (see wire.TLS).
func verifyPeer(t *wire.TLS, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("troupe: peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         t.CA,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	return err
}

func tlsClientConfig(t *wire.TLS) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{t.Certificate},
		// The chain is verified in VerifyConnection against the cluster
		// CA, without the host name check (see TLS).
		InsecureSkipVerify: true,
		VerifyConnection:   func(cs tls.ConnectionState) error { return verifyPeer(t, cs) },
	}
}

func tlsServerConfig(t *wire.TLS) *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{t.Certificate},
		ClientAuth:       tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error { return verifyPeer(t, cs) },
	}
}

// withDefaults returns a copy with every zero field set to its default.
func withDefaults(c wire.Config) wire.Config {
	c.Limits = limitsWithDefaults(c.Limits)
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HandshakeTimeout, wire.DefaultHandshakeTimeout)
	def(&c.KeepaliveAfter, wire.DefaultKeepaliveAfter)
	def(&c.KeepaliveTimeout, wire.DefaultKeepaliveTimeout)
	def(&c.RedialMin, wire.DefaultRedialMin)
	def(&c.RedialMax, wire.DefaultRedialMax)
	if c.SendQueue == 0 {
		c.SendQueue = max(wire.DefaultSendQueue, c.Limits.MaxMessage)
	}
	if c.NotSentLowat == 0 {
		c.NotSentLowat = wire.DefaultNotSentLowat
	}
	if c.Incarnation == 0 {
		c.Incarnation = uint64(time.Now().UnixNano())
	}
	if c.Dialer == nil {
		c.Dialer = &net.Dialer{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// dialAddress applies AddressMap to an advertised address.
func dialAddress(c *wire.Config, advertised string) string {
	if a, ok := c.AddressMap[advertised]; ok {
		return a
	}
	return advertised
}

// resumeGrace is how long a session keeps in-flight data for a peer it
// cannot reach: 2 × KeepaliveAfter + KeepaliveTimeout.
func resumeGrace(c *wire.Config) time.Duration { return 2*c.KeepaliveAfter + c.KeepaliveTimeout }

// limitsWithDefaults returns l with zero fields replaced by the wire
// defaults, as wire.Limits.Validate reads them.
func limitsWithDefaults(l wire.Limits) wire.Limits {
	if l.MaxFrame == 0 {
		l.MaxFrame = wire.DefaultMaxFrame
	}
	if l.MaxMessage == 0 {
		l.MaxMessage = wire.DefaultMaxMessage
	}
	if l.Window == 0 {
		l.Window = wire.DefaultWindow
	}
	return l
}

// chunkSize is the largest envelope chunk carried by one data frame.
func chunkSize(l wire.Limits) int { return l.MaxFrame - maxDataOverhead }

// smallFrame is the scheduler's frame limit (its MaxFrame): the largest
// chunk of a small envelope's frame and the least of a large one's.
func smallFrame(l wire.Limits) int { return min(flow.DefaultMaxFrame, chunkSize(l)) }
