package transport

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/troupe-go/troupe/wire"
)

// ProtocolVersion is the frame protocol version this binary speaks. It
// only moves forward; both sides of a connection must speak the same one.
const ProtocolVersion = 1

// HeaderSize is the size in bytes of every frame header. The layout of the
// header (version first) is frozen across versions so that any binary can
// read the version of any frame and refuse it cleanly.
const HeaderSize = 8

// FrameType identifies what a frame carries.
type FrameType uint8

// Frame types of protocol version 1; docs/wire.md describes each payload.
const (
	FrameHello   FrameType = 1 // handshake: identity, version, codecs, limits
	FrameResume  FrameType = 2 // handshake: per-stream received byte counts
	FrameData    FrameType = 3 // one chunk of one envelope on one stream
	FrameCredit  FrameType = 4 // cumulative bytes consumed on one stream, and the window
	FramePing    FrameType = 5 // liveness and RTT probe
	FramePong    FrameType = 6 // answer to a ping, echoing its payload
	FrameAbort   FrameType = 7 // a partly sent envelope was cancelled
	FrameGoodbye FrameType = 8 // orderly close or refusal, with a reason
)

func (t FrameType) String() string {
	switch t {
	case FrameHello:
		return "hello"
	case FrameResume:
		return "resume"
	case FrameData:
		return "data"
	case FrameCredit:
		return "credit"
	case FramePing:
		return "ping"
	case FramePong:
		return "pong"
	case FrameAbort:
		return "abort"
	case FrameGoodbye:
		return "goodbye"
	default:
		return fmt.Sprintf("type(%d)", uint8(t))
	}
}

// Flags are per-type bits in the frame header. Bits not defined for a type
// must be zero.
type Flags uint8

// Data frame flags.
const (
	FlagFirst      Flags = 1 << 0 // first chunk of an envelope: carries its total length
	FlagLast       Flags = 1 << 1 // last chunk of an envelope: deliver it after this
	FlagCompressed Flags = 1 << 2 // chunk compressed with the connection's codec
)

// Resume frame flags.
const (
	// FlagFresh in a resume frame says the sender has no session with the
	// peer's identity (or the peer restarted): both sides start afresh and
	// fail whatever they had pending.
	FlagFresh Flags = 1 << 0
	// FlagConfirm marks the acceptor's last handshake frame, sent when it
	// has made the connection the session's: the dialer makes it its own
	// only then. Its payload is empty.
	FlagConfirm Flags = 1 << 1
)

var allowedFlags = [...]Flags{
	FrameData:   FlagFirst | FlagLast | FlagCompressed,
	FrameResume: FlagFresh | FlagConfirm,
}

func (t FrameType) allowed(f Flags) bool {
	if int(t) < len(allowedFlags) {
		return f&^allowedFlags[t] == 0
	}
	return f == 0
}

// StreamID names a logical stream inside a connection.
type StreamID uint8

// The streams of a Troupe connection. Each has its own byte credit, so
// state transfer on StreamReplication never eats the credit of application
// messages. Connection-level frames (hello, resume, ping, pong, goodbye)
// carry stream 0.
const (
	StreamControl     StreamID = 0
	StreamMembership  StreamID = 1
	StreamApplication StreamID = 2
	StreamReplication StreamID = 3

	// NumStreams is the number of streams this version serves. Stream
	// ids up to 255 are reserved for later versions.
	NumStreams = 4
)

func (s StreamID) String() string {
	switch s {
	case StreamControl:
		return "control"
	case StreamMembership:
		return "membership"
	case StreamApplication:
		return "application"
	case StreamReplication:
		return "replication"
	default:
		return fmt.Sprintf("stream(%d)", uint8(s))
	}
}

// Header is the fixed part in front of every frame.
type Header struct {
	Version uint8
	Type    FrameType
	Flags   Flags
	Stream  StreamID
	Length  uint32 // payload bytes after the header
}

func appendHeader(dst []byte, h Header) []byte {
	dst = append(dst, h.Version, byte(h.Type), byte(h.Flags), byte(h.Stream))
	return binary.BigEndian.AppendUint32(dst, h.Length)
}

// parseHeader decodes and checks a header: the version must be ours, the
// type known, the flags allowed for it, connection-level frames on stream
// 0, data-bearing frames on a served stream, and the payload within
// maxPayload.
func parseHeader(b []byte, maxPayload int) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, frameErr(ErrMalformedFrame, Header{}, "short header: %d bytes", len(b))
	}
	h := Header{
		Version: b[0],
		Type:    FrameType(b[1]),
		Flags:   Flags(b[2]),
		Stream:  StreamID(b[3]),
		Length:  binary.BigEndian.Uint32(b[4:8]),
	}
	if h.Version != ProtocolVersion {
		return h, frameErr(ErrUnsupportedVersion, h, "version %d, want %d", h.Version, ProtocolVersion)
	}
	if h.Type < FrameHello || h.Type > FrameGoodbye {
		return h, frameErr(ErrMalformedFrame, h, "unknown type")
	}
	if !h.Type.allowed(h.Flags) {
		return h, frameErr(ErrMalformedFrame, h, "flags %#x not allowed", uint8(h.Flags))
	}
	switch h.Type {
	case FrameData, FrameCredit, FrameAbort:
		if h.Stream >= NumStreams {
			return h, frameErr(ErrMalformedFrame, h, "stream not served")
		}
	default:
		if h.Stream != 0 {
			return h, frameErr(ErrMalformedFrame, h, "connection frame on a stream")
		}
	}
	if uint64(h.Length) > uint64(maxPayload) {
		return h, frameErr(ErrFrameTooLarge, h, "payload %d bytes, limit %d", h.Length, maxPayload)
	}
	return h, nil
}

// frame is one decoded frame; Payload aliases the reader's buffer and is
// valid until the next read.
type frame struct {
	Header
	Payload []byte
}

// frameReader reads frames from a byte stream, reusing one buffer.
type frameReader struct {
	r          io.Reader
	maxPayload int
	hdr        [HeaderSize]byte
	buf        []byte
}

func newFrameReader(r io.Reader, maxPayload int) *frameReader {
	return &frameReader{r: r, maxPayload: maxPayload}
}

// read returns the next whole frame. A stream that ends between frames
// returns io.EOF; one that ends inside a frame returns
// io.ErrUnexpectedEOF.
func (fr *frameReader) read() (frame, error) {
	h, err := fr.header()
	if err != nil {
		return frame{}, err
	}
	return fr.payload(h)
}

// header reads and checks the next frame header; the caller reads the
// payload, with payload or by itself.
func (fr *frameReader) header() (Header, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return Header{}, err
	}
	return parseHeader(fr.hdr[:], fr.maxPayload)
}

// payload reads the payload of the frame whose header was just read.
func (fr *frameReader) payload(h Header) (frame, error) {
	if cap(fr.buf) < int(h.Length) {
		fr.buf = make([]byte, h.Length)
	}
	p := fr.buf[:h.Length]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return frame{Header: h, Payload: p}, nil
}

// appendFrame appends header and payload of a frame of protocol version 1.
func appendFrame(dst []byte, t FrameType, f Flags, s StreamID, payload []byte) []byte {
	dst = appendHeader(dst, Header{Version: ProtocolVersion, Type: t, Flags: f, Stream: s, Length: uint32(len(payload))})
	return append(dst, payload...)
}

// dataFrame is the payload of a FrameData frame.
//
// Layout: uvarint envelope id, uvarint offset of the chunk within the
// envelope (uncompressed bytes), then on a first chunk the uvarint total
// length of the envelope, then on a compressed chunk the uvarint
// uncompressed length of the chunk, then the chunk bytes to the end.
type dataFrame struct {
	Envelope uint64 // per-stream envelope id, increasing from 0 in the order envelopes start
	Offset   uint64 // position of Chunk within the envelope
	Total    uint64 // whole envelope length; only with FlagFirst
	RawLen   uint64 // uncompressed chunk length; only with FlagCompressed
	Chunk    []byte // possibly compressed bytes
}

// maxDataOverhead bounds the bytes a data frame adds before its chunk: four
// uvarints of at most 10 bytes each.
const maxDataOverhead = 4 * binary.MaxVarintLen64

func appendData(dst []byte, flags Flags, d dataFrame) []byte {
	dst = binary.AppendUvarint(dst, d.Envelope)
	dst = binary.AppendUvarint(dst, d.Offset)
	if flags&FlagFirst != 0 {
		dst = binary.AppendUvarint(dst, d.Total)
	}
	if flags&FlagCompressed != 0 {
		dst = binary.AppendUvarint(dst, d.RawLen)
	}
	return append(dst, d.Chunk...)
}

// parseData decodes a data payload and checks it against the limits: the
// announced envelope length within maxMessage, the chunk within it, and an
// uncompressed chunk within maxFrame.
func parseData(h Header, p []byte, maxFrame, maxMessage int) (dataFrame, error) {
	d, n, err := parseDataPrefix(h, p, len(p), maxFrame, maxMessage)
	if err != nil {
		return d, err
	}
	d.Chunk = p[n:]
	return d, nil
}

// parseDataPrefix decodes the fields before the chunk of a data payload of
// length bytes, of which p holds at least the first maxDataOverhead (or
// all), checks them as parseData does, and returns them with their length.
// The reader uses it to read a chunk straight into its envelope.
func parseDataPrefix(h Header, p []byte, length, maxFrame, maxMessage int) (dataFrame, int, error) {
	var d dataFrame
	var ok bool
	rest := p
	if d.Envelope, rest, ok = uvarint(rest); !ok {
		return d, 0, frameErr(ErrMalformedFrame, h, "bad envelope id")
	}
	if d.Offset, rest, ok = uvarint(rest); !ok {
		return d, 0, frameErr(ErrMalformedFrame, h, "bad offset")
	}
	first := h.Flags&FlagFirst != 0
	if first != (d.Offset == 0) {
		return d, 0, frameErr(ErrMalformedFrame, h, "first flag with offset %d", d.Offset)
	}
	if first {
		if d.Total, rest, ok = uvarint(rest); !ok {
			return d, 0, frameErr(ErrMalformedFrame, h, "bad total length")
		}
		if d.Total > uint64(maxMessage) {
			return d, 0, frameErr(wire.ErrMessageTooLarge, h, "envelope of %d bytes, limit %d", d.Total, maxMessage)
		}
	}
	n := len(p) - len(rest)
	rawLen := uint64(length - n)
	if h.Flags&FlagCompressed != 0 {
		if d.RawLen, rest, ok = uvarint(rest); !ok {
			return d, 0, frameErr(ErrMalformedFrame, h, "bad raw length")
		}
		if d.RawLen > uint64(maxFrame) {
			return d, 0, frameErr(ErrFrameTooLarge, h, "chunk decompresses to %d bytes, limit %d", d.RawLen, maxFrame)
		}
		rawLen = d.RawLen
		n = len(p) - len(rest)
	}
	if d.Offset > uint64(maxMessage) || d.Offset+rawLen > uint64(maxMessage) {
		return d, 0, frameErr(wire.ErrMessageTooLarge, h, "chunk ends past the message limit")
	}
	if first && rawLen > d.Total {
		return d, 0, frameErr(ErrMalformedFrame, h, "chunk of %d bytes in envelope of %d", rawLen, d.Total)
	}
	if h.Flags&FlagLast == 0 && rawLen == 0 {
		// Empty chunks are only meaningful to end an envelope; refusing
		// them elsewhere bounds the work a peer can cause per byte.
		return d, 0, frameErr(ErrMalformedFrame, h, "empty middle chunk")
	}
	return d, n, nil
}

// credit is the payload of a FrameCredit frame: the cumulative bytes of the
// stream the receiver consumed, its current window (which auto-tuning
// grows from 256 KiB up to the agreed window), and the cumulative bytes it
// received (at least Consumed), which lets the sender's estimator tell a
// slow link from a slow consumer.
type credit struct {
	Consumed uint64
	Window   uint64
	Received uint64
}

func appendCredit(dst []byte, c credit) []byte {
	dst = binary.AppendUvarint(dst, c.Consumed)
	dst = binary.AppendUvarint(dst, c.Window)
	return binary.AppendUvarint(dst, c.Received)
}

func parseCredit(h Header, p []byte) (credit, error) {
	var c credit
	var ok bool
	if c.Consumed, p, ok = uvarint(p); !ok {
		return c, frameErr(ErrMalformedFrame, h, "bad consumed count")
	}
	if c.Window, p, ok = uvarint(p); !ok || c.Window == 0 || c.Window > 1<<40 {
		return c, frameErr(ErrMalformedFrame, h, "bad window")
	}
	if c.Received, p, ok = uvarint(p); !ok || c.Received < c.Consumed || len(p) != 0 {
		return c, frameErr(ErrMalformedFrame, h, "bad received count")
	}
	return c, nil
}

// parseUvarintPayload decodes a payload that is exactly one uvarint: the
// envelope id of an abort.
func parseUvarintPayload(h Header, p []byte) (uint64, error) {
	v, rest, ok := uvarint(p)
	if !ok || len(rest) != 0 {
		return 0, frameErr(ErrMalformedFrame, h, "want one uvarint")
	}
	return v, nil
}

// pingSize is the payload size of ping and pong frames: an opaque 8-byte
// token the pong echoes.
const pingSize = 8

func parsePing(h Header, p []byte) (uint64, error) {
	if len(p) != pingSize {
		return 0, frameErr(ErrMalformedFrame, h, "payload of %d bytes, want %d", len(p), pingSize)
	}
	return binary.BigEndian.Uint64(p), nil
}

// goodbye is the payload of a FrameGoodbye frame: a reason code, and for
// refusals the refusal reason, then UTF-8 detail to the end (at most
// maxGoodbyeDetail bytes).
type goodbye struct {
	Code   goodbyeCode
	Refuse wire.RefuseReason // only with goodbyeRefused
	Detail string
}

type goodbyeCode uint8

const (
	goodbyeClose      goodbyeCode = 1 // orderly close: the sender is going away
	goodbyeRefused    goodbyeCode = 2 // handshake refused
	goodbyeSuperseded goodbyeCode = 3 // another connection between the pair won
	goodbyeProtocol   goodbyeCode = 4 // the sender saw a protocol error
)

const maxGoodbyeDetail = 1024

func appendGoodbye(dst []byte, g goodbye) []byte {
	dst = append(dst, byte(g.Code), byte(g.Refuse))
	d := g.Detail
	if len(d) > maxGoodbyeDetail {
		d = d[:maxGoodbyeDetail]
	}
	return append(dst, d...)
}

func parseGoodbye(h Header, p []byte) (goodbye, error) {
	if len(p) < 2 || len(p) > 2+maxGoodbyeDetail {
		return goodbye{}, frameErr(ErrMalformedFrame, h, "payload of %d bytes", len(p))
	}
	g := goodbye{Code: goodbyeCode(p[0]), Refuse: wire.RefuseReason(p[1]), Detail: string(p[2:])}
	if g.Code < goodbyeClose || g.Code > goodbyeProtocol {
		return goodbye{}, frameErr(ErrMalformedFrame, h, "unknown goodbye code %d", g.Code)
	}
	return g, nil
}

// resumeCounts is the payload of a FrameResume frame: for each stream, the
// count of data bytes (uncompressed, in whole frames) received from the
// peer in this session. Layout: one uvarint per served stream, in stream
// order; a later version appends streams.
type resumeCounts [NumStreams]uint64

func appendResume(dst []byte, c resumeCounts) []byte {
	for _, v := range c {
		dst = binary.AppendUvarint(dst, v)
	}
	return dst
}

func parseResume(h Header, p []byte) (resumeCounts, error) {
	var c resumeCounts
	for i := range c {
		var ok bool
		if c[i], p, ok = uvarint(p); !ok {
			return c, frameErr(ErrMalformedFrame, h, "bad count for stream %d", i)
		}
	}
	if len(p) != 0 {
		return c, frameErr(ErrMalformedFrame, h, "%d trailing bytes", len(p))
	}
	return c, nil
}

func uvarint(p []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, p, false
	}
	return v, p[n:], true
}

func binaryAppendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func binaryAppendUint64(b []byte, v uint64) []byte  { return binary.BigEndian.AppendUint64(b, v) }
