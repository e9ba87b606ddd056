package transport

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/troupe-go/troupe/wire"
)

func readOne(t *testing.T, b []byte, max int) (frame, error) {
	t.Helper()
	return newFrameReader(bytes.NewReader(b), max).read()
}

func TestFrameHeaderRoundTrips(t *testing.T) {
	for _, ft := range []FrameType{FrameHello, FrameResume, FramePing, FramePong, FrameGoodbye} {
		b := appendFrame(nil, ft, 0, 0, []byte("payload"))
		f, err := readOne(t, b, wire.DefaultMaxFrame)
		if err != nil {
			t.Fatalf("%s frame: read failed: %v", ft, err)
		}
		if f.Type != ft || f.Version != ProtocolVersion || string(f.Payload) != "payload" {
			t.Fatalf("%s frame: read back %+v", ft, f)
		}
	}
}

func TestDataFrameRoundTripsAllFlagCombinations(t *testing.T) {
	for flags := Flags(0); flags <= FlagFirst|FlagLast|FlagCompressed; flags++ {
		d := dataFrame{Envelope: 7, Chunk: []byte("abc")}
		if flags&FlagFirst != 0 {
			d.Total = 10
		} else {
			d.Offset = 4
		}
		if flags&FlagCompressed != 0 {
			d.RawLen = 5
		}
		b := appendFrame(nil, FrameData, flags, StreamApplication, appendData(nil, flags, d))
		f, err := readOne(t, b, wire.DefaultMaxFrame)
		if err != nil {
			t.Fatalf("flags %#x: %v", flags, err)
		}
		got, err := parseData(f.Header, f.Payload, wire.DefaultMaxFrame, wire.DefaultMaxMessage)
		if err != nil {
			t.Fatalf("flags %#x: parse: %v", flags, err)
		}
		if got.Envelope != d.Envelope || got.Offset != d.Offset || got.Total != d.Total || got.RawLen != d.RawLen || !bytes.Equal(got.Chunk, d.Chunk) {
			t.Fatalf("flags %#x: got %+v, want %+v", flags, got, d)
		}
	}
}

func TestGoodbyeAndResumeRoundTrip(t *testing.T) {
	g := goodbye{Code: goodbyeRefused, Refuse: wire.RefusedLimits, Detail: "window 1 != 2"}
	h := Header{Type: FrameGoodbye}
	got, err := parseGoodbye(h, appendGoodbye(nil, g))
	if err != nil || got != g {
		t.Fatalf("goodbye round trip: got %+v, %v; want %+v", got, err, g)
	}
	c := resumeCounts{1, 1 << 40, 0, 300}
	gc, err := parseResume(Header{Type: FrameResume}, appendResume(nil, c))
	if err != nil || gc != c {
		t.Fatalf("resume round trip: got %v, %v; want %v", gc, err, c)
	}
}

func TestFrameDecodeRejects(t *testing.T) {
	hdr := func(v uint8, ft FrameType, f Flags, s StreamID, n uint32) []byte {
		return appendHeader(nil, Header{Version: v, Type: ft, Flags: f, Stream: s, Length: n})
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"a newer protocol version", hdr(2, FramePing, 0, 0, 8), ErrUnsupportedVersion},
		{"version zero", hdr(0, FramePing, 0, 0, 8), ErrUnsupportedVersion},
		{"an unknown type", hdr(1, 99, 0, 0, 0), ErrMalformedFrame},
		{"type zero", hdr(1, 0, 0, 0, 0), ErrMalformedFrame},
		{"data flags on a ping", hdr(1, FramePing, FlagFirst, 0, 8), ErrMalformedFrame},
		{"an undefined data flag", hdr(1, FrameData, 1<<5, 2, 3), ErrMalformedFrame},
		{"a ping on a stream", hdr(1, FramePing, 0, 2, 8), ErrMalformedFrame},
		{"data on an unserved stream", hdr(1, FrameData, FlagFirst, NumStreams, 3), ErrMalformedFrame},
		{"a payload over the frame limit", hdr(1, FrameData, 0, 2, wire.DefaultMaxFrame+1), ErrFrameTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readOne(t, c.b, wire.DefaultMaxFrame)
			if !errors.Is(err, c.want) {
				t.Fatalf("want %v, got %v", c.want, err)
			}
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("want a *FrameError, got %T", err)
			}
		})
	}
}

func TestFrameCutMidPayloadIsUnexpectedEOF(t *testing.T) {
	b := appendFrame(nil, FramePing, 0, 0, make([]byte, pingSize))
	if _, err := readOne(t, b[:HeaderSize+3], wire.DefaultMaxFrame); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut inside the payload: want io.ErrUnexpectedEOF, got %v", err)
	}
	if _, err := readOne(t, b[:3], wire.DefaultMaxFrame); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut inside the header: want io.ErrUnexpectedEOF, got %v", err)
	}
	if _, err := readOne(t, nil, wire.DefaultMaxFrame); err != io.EOF {
		t.Fatalf("clean end between frames: want io.EOF, got %v", err)
	}
}

func TestDataPayloadRejects(t *testing.T) {
	h := func(f Flags) Header { return Header{Type: FrameData, Flags: f, Stream: StreamApplication} }
	cases := []struct {
		name  string
		flags Flags
		d     dataFrame
		want  error
	}{
		{"first chunk at a nonzero offset", FlagFirst, dataFrame{Envelope: 1, Offset: 3, Total: 9, Chunk: []byte("x")}, ErrMalformedFrame},
		{"later chunk at offset zero", 0, dataFrame{Envelope: 1, Chunk: []byte("x")}, ErrMalformedFrame},
		{"total over the message limit", FlagFirst, dataFrame{Envelope: 1, Total: wire.DefaultMaxMessage + 1, Chunk: []byte("x")}, wire.ErrMessageTooLarge},
		{"chunk ending past the message limit", 0, dataFrame{Envelope: 1, Offset: wire.DefaultMaxMessage, Chunk: []byte("x")}, wire.ErrMessageTooLarge},
		{"first chunk longer than its envelope", FlagFirst, dataFrame{Envelope: 1, Total: 1, Chunk: []byte("xy")}, ErrMalformedFrame},
		{"compressed chunk claiming more than a frame", FlagCompressed, dataFrame{Envelope: 1, Offset: 1, RawLen: wire.DefaultMaxFrame + 1, Chunk: []byte("x")}, ErrFrameTooLarge},
		{"empty middle chunk", 0, dataFrame{Envelope: 1, Offset: 1}, ErrMalformedFrame},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseData(h(c.flags), appendData(nil, c.flags, c.d), wire.DefaultMaxFrame, wire.DefaultMaxMessage)
			if !errors.Is(err, c.want) {
				t.Fatalf("want %v, got %v", c.want, err)
			}
		})
	}
	if _, err := parseData(h(FlagFirst), []byte{0x80}, wire.DefaultMaxFrame, wire.DefaultMaxMessage); !errors.Is(err, ErrMalformedFrame) {
		t.Fatalf("truncated uvarint: want ErrMalformedFrame, got %v", err)
	}
}

func TestOtherPayloadsReject(t *testing.T) {
	if _, err := parsePing(Header{Type: FramePing}, []byte{1, 2}); !errors.Is(err, ErrMalformedFrame) {
		t.Errorf("short ping: want ErrMalformedFrame, got %v", err)
	}
	if _, err := parseUvarintPayload(Header{Type: FrameAbort}, []byte{1, 2}); !errors.Is(err, ErrMalformedFrame) {
		t.Errorf("abort with trailing bytes: want ErrMalformedFrame, got %v", err)
	}
	if _, err := parseCredit(Header{Type: FrameCredit}, []byte{1, 0, 1}); !errors.Is(err, ErrMalformedFrame) {
		t.Errorf("credit with a zero window: want ErrMalformedFrame, got %v", err)
	}
	if _, err := parseCredit(Header{Type: FrameCredit}, []byte{5, 9, 4}); !errors.Is(err, ErrMalformedFrame) {
		t.Errorf("credit receiving less than it consumed: want ErrMalformedFrame, got %v", err)
	}
	c := credit{Consumed: 1 << 33, Window: 256 << 10, Received: 1<<33 + 5}
	if got, err := parseCredit(Header{Type: FrameCredit}, appendCredit(nil, c)); err != nil || got != c {
		t.Errorf("credit round trip: got %+v, %v", got, err)
	}
	if _, err := parseGoodbye(Header{Type: FrameGoodbye}, []byte{9, 0}); !errors.Is(err, ErrMalformedFrame) {
		t.Errorf("unknown goodbye code: want ErrMalformedFrame, got %v", err)
	}
	if _, err := parseResume(Header{Type: FrameResume}, []byte{1, 2, 3}); !errors.Is(err, ErrMalformedFrame) {
		t.Errorf("resume missing a stream: want ErrMalformedFrame, got %v", err)
	}
}

func TestLimitsValidateNamesTheField(t *testing.T) {
	if err := (wire.Limits{}).Validate(); err != nil {
		t.Fatalf("zero wire.Limits must mean the defaults and validate: %v", err)
	}
	cases := map[string]wire.Limits{
		"MaxFrame":   {MaxFrame: 100},
		"MaxMessage": {MaxMessage: 1000},
		"Window":     {Window: wire.MinMaxFrame, MaxFrame: 2 * wire.MinMaxFrame},
	}
	for field, l := range cases {
		err := l.Validate()
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("Limits."+field)) {
			t.Errorf("%+v: want an error naming wire.Limits.%s, got %v", l, field, err)
		}
	}
}
