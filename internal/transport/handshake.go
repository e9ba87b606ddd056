package transport

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/troupe-go/troupe/ring"
	"github.com/troupe-go/troupe/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// maxHelloSize bounds a hello payload. Hellos are read before the limits
// are agreed, so they have a small fixed limit of their own.
const maxHelloSize = 16 << 10

// maxCodecOffers bounds the codec list of a hello.
const maxCodecOffers = 8

// hello is the first frame each side sends. It is encoded as a msgpack map
// keyed by field name, so later versions may add fields that older
// binaries skip.
type hello struct {
	Cluster    string      `msgpack:"cluster"`
	Node       ring.NodeID `msgpack:"node"`
	Version    uint8       `msgpack:"version"`
	Codecs     []string    `msgpack:"codecs"`
	MaxFrame   uint64      `msgpack:"max_frame"`
	MaxMessage uint64      `msgpack:"max_message"`
	Window     uint64      `msgpack:"window"`
	// Known is the incarnation of the peer at this address with which
	// the sender held a session when it sent the hello, 0 if none. It is
	// advisory (for logs and diagnosis): the resume frames, sent after
	// any previous connection is fenced, decide whether the session
	// resumes.
	Known uint64 `msgpack:"known"`
}

func encodeHello(h hello) ([]byte, error) { return msgpack.Marshal(&h) }

func parseHello(p []byte) (hello, error) {
	var h hello
	if err := msgpack.Unmarshal(p, &h); err != nil {
		return hello{}, fmt.Errorf("%w: hello: %v", ErrMalformedFrame, err)
	}
	if len(h.Codecs) > maxCodecOffers {
		return hello{}, fmt.Errorf("%w: hello offers %d codecs", ErrMalformedFrame, len(h.Codecs))
	}
	return h, nil
}

// local is what a node states about itself in every handshake.
type local struct {
	cluster string
	node    ring.NodeID
	limits  wire.Limits
	codecs  []string
	tls     *wire.TLS
	timeout time.Duration
}

func (l *local) hello(known uint64) hello {
	return hello{
		Cluster:    l.cluster,
		Node:       l.node,
		Version:    ProtocolVersion,
		Codecs:     l.codecs,
		MaxFrame:   uint64(l.limits.MaxFrame),
		MaxMessage: uint64(l.limits.MaxMessage),
		Window:     uint64(l.limits.Window),
		Known:      known,
	}
}

// check compares a peer's hello with ours and returns the refusal, if any.
// expect, when not empty, is the advertised address the dialer meant to
// reach.
func (l *local) check(p hello, expect string) *wire.Refused {
	switch {
	case p.Cluster != l.cluster:
		return &wire.Refused{Reason: wire.RefusedCluster, Detail: fmt.Sprintf("peer is in %q, we are in %q", p.Cluster, l.cluster)}
	case p.Version != ProtocolVersion:
		return &wire.Refused{Reason: wire.RefusedVersion, Detail: fmt.Sprintf("peer speaks %d, we speak %d", p.Version, ProtocolVersion)}
	case p.MaxFrame != uint64(l.limits.MaxFrame) || p.MaxMessage != uint64(l.limits.MaxMessage) || p.Window != uint64(l.limits.Window):
		return &wire.Refused{Reason: wire.RefusedLimits, Detail: fmt.Sprintf("peer frame/message/window %d/%d/%d, ours %d/%d/%d",
			p.MaxFrame, p.MaxMessage, p.Window, l.limits.MaxFrame, l.limits.MaxMessage, l.limits.Window)}
	case p.Node.Incarnation == 0:
		return &wire.Refused{Reason: wire.RefusedIdentity, Detail: "peer incarnation is zero"}
	case p.Node == l.node:
		return &wire.Refused{Reason: wire.RefusedIdentity, Detail: "peer has our own identity"}
	case expect != "" && p.Node.Addr != expect:
		return &wire.Refused{Reason: wire.RefusedIdentity, Detail: fmt.Sprintf("dialed %s, reached %s", expect, p.Node.Addr)}
	}
	return nil
}

// hsConn is a connection whose hellos have been exchanged and accepted.
type hsConn struct {
	net.Conn
	r      *bufio.Reader
	peer   hello
	codec  string // "" when uncompressed
	dialer bool   // true on the side that dialed
}

// opener returns the identity of the node that dialed the connection.
func (c *hsConn) opener(self ring.NodeID) ring.NodeID {
	if c.dialer {
		return self
	}
	return c.peer.Node
}

// dialOrder orders identities for the simultaneous-dial rule: by
// incarnation, then address; of two crossing connections both ends keep
// the one dialed by the smaller identity. It is not ring.NodeID.Compare
// (address first) because the rule is part of the wire protocol
// (docs/wire.md): both ends of a pair must decide alike, so binaries of
// different versions must keep this order.
func dialOrder(a, b ring.NodeID) int {
	if c := cmp.Compare(a.Incarnation, b.Incarnation); c != 0 {
		return c
	}
	return cmp.Compare(a.Addr, b.Addr)
}

// dialHandshake runs the dialer's half: TLS, send our hello, read theirs,
// check it. expect is the advertised address dialed; known the incarnation
// we hold a session with there (0 if none). On error the connection is
// closed.
func dialHandshake(ctx context.Context, c net.Conn, l *local, expect string, known uint64) (*hsConn, error) {
	hc, err := handshake(ctx, c, l, true, func(*hsConn) (uint64, *wire.Refused) { return known, nil }, expect)
	if err != nil {
		c.Close()
		return nil, err
	}
	return hc, nil
}

// acceptHandshake runs the acceptor's half: TLS, read the dialer's hello,
// check it, answer with ours. knownFor returns the incarnation we hold a
// session with for the dialer's identity. On error the connection is
// closed.
func acceptHandshake(ctx context.Context, c net.Conn, l *local, knownFor func(ring.NodeID) uint64) (*hsConn, error) {
	hc, err := handshake(ctx, c, l, false, func(hc *hsConn) (uint64, *wire.Refused) { return knownFor(hc.peer.Node), nil }, "")
	if err != nil {
		c.Close()
		return nil, err
	}
	return hc, nil
}

func handshake(ctx context.Context, c net.Conn, l *local, dialer bool, known func(*hsConn) (uint64, *wire.Refused), expect string) (_ *hsConn, err error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() || ctx.Err() != nil {
			// The deadline fired: report the timeout rather than the
			// i/o error it caused.
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = &wire.Refused{Reason: wire.RefusedTimeout, Err: wire.ErrHandshakeTimeout}
			} else if err != nil && ctx.Err() != nil {
				err = ctx.Err()
			}
		}
		if err == nil {
			c.SetDeadline(time.Time{})
		}
	}()

	conn := c
	if l.tls != nil {
		var tc *tls.Conn
		if dialer {
			tc = tls.Client(c, tlsClientConfig(l.tls))
		} else {
			tc = tls.Server(c, tlsServerConfig(l.tls))
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, &wire.Refused{Reason: wire.RefusedTLS, Err: err}
		}
		conn = tc
	}
	hc := &hsConn{Conn: conn, r: bufio.NewReaderSize(conn, 64<<10), dialer: dialer}
	if dialer {
		if err := writeHello(conn, l, known, hc); err != nil {
			return nil, err
		}
		if err := readHello(hc, l, expect); err != nil {
			return nil, err
		}
		hc.codec = chooseCodec(l.codecs, hc.peer.Codecs)
	} else {
		if err := readHello(hc, l, ""); err != nil {
			return nil, err
		}
		if err := writeHello(conn, l, known, hc); err != nil {
			return nil, err
		}
		hc.codec = chooseCodec(hc.peer.Codecs, l.codecs)
	}
	return hc, nil
}

func writeHello(w io.Writer, l *local, known func(*hsConn) (uint64, *wire.Refused), hc *hsConn) error {
	k, _ := known(hc)
	p, err := encodeHello(l.hello(k))
	if err != nil {
		return err
	}
	_, err = w.Write(appendFrame(nil, FrameHello, 0, 0, p))
	return tlsRefusal(err)
}

// readHello reads the peer's hello into hc.peer and checks it. A refusal
// of ours is told to the peer in a goodbye before returning.
func readHello(hc *hsConn, l *local, expect string) error {
	f, err := newFrameReader(hc.r, maxHelloSize).read()
	if err != nil {
		if errors.Is(err, ErrUnsupportedVersion) {
			r := &wire.Refused{Reason: wire.RefusedVersion, Err: err}
			sendRefusal(hc.Conn, r)
			return r
		}
		return tlsRefusal(err)
	}
	switch f.Type {
	case FrameHello:
	case FrameGoodbye:
		g, err := parseGoodbye(f.Header, f.Payload)
		if err != nil {
			return err
		}
		if g.Code == goodbyeRefused {
			return &wire.Refused{Reason: g.Refuse, ByPeer: true, Detail: g.Detail}
		}
		return fmt.Errorf("%w: goodbye during handshake", wire.ErrClosed)
	default:
		r := &wire.Refused{Reason: wire.RefusedMalformed, Detail: fmt.Sprintf("%s frame before hello", f.Type)}
		sendRefusal(hc.Conn, r)
		return r
	}
	p, err := parseHello(f.Payload)
	if err != nil {
		r := &wire.Refused{Reason: wire.RefusedMalformed, Err: err}
		sendRefusal(hc.Conn, r)
		return r
	}
	if r := l.check(p, expect); r != nil {
		sendRefusal(hc.Conn, r)
		return r
	}
	hc.peer = p
	return nil
}

// sendRefusal tells the peer why we refuse it; errors are ignored since
// the connection is about to close anyway.
func sendRefusal(w io.Writer, r *wire.Refused) {
	_, _ = w.Write(appendFrame(nil, FrameGoodbye, 0, 0, appendGoodbye(nil, goodbye{Code: goodbyeRefused, Refuse: r.Reason, Detail: r.Detail})))
}

// tlsRefusal turns a TLS alert or certificate error seen after the TLS
// handshake (TLS 1.3 reports a rejected client certificate on the first
// read) into a refusal.
func tlsRefusal(err error) error {
	var alert tls.AlertError
	var cve *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "remote error":
		// A TLS alert from the peer over TCP.
		return &wire.Refused{Reason: wire.RefusedTLS, ByPeer: true, Err: err}
	case errors.As(err, &alert):
		return &wire.Refused{Reason: wire.RefusedTLS, ByPeer: true, Err: err}
	case errors.As(err, &cve):
		return &wire.Refused{Reason: wire.RefusedTLS, Err: err}
	}
	return err
}
