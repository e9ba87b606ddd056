package transport

import (
	"bytes"
	"testing"

	"github.com/troupe-go/troupe/wire"
)

// FuzzReadFrame feeds arbitrary bytes to the frame reader and to the
// payload decoder of whatever type the header names. Nothing may panic;
// a data frame that decodes must encode back to the same bytes.
func FuzzReadFrame(f *testing.F) {
	f.Add(appendFrame(nil, FramePing, 0, 0, make([]byte, pingSize)))
	f.Add(appendFrame(nil, FrameCredit, 0, StreamApplication, appendCredit(nil, credit{Consumed: 300, Window: 1 << 18, Received: 400})))
	f.Add(appendFrame(nil, FrameAbort, 0, StreamReplication, []byte{5}))
	f.Add(appendFrame(nil, FrameGoodbye, 0, 0, appendGoodbye(nil, goodbye{Code: goodbyeRefused, Refuse: wire.RefusedCluster, Detail: "a != b"})))
	f.Add(appendFrame(nil, FrameResume, FlagFresh, 0, appendResume(nil, resumeCounts{1, 2, 3, 4})))
	f.Add(appendFrame(nil, FrameData, FlagFirst|FlagLast, StreamApplication, appendData(nil, FlagFirst|FlagLast, dataFrame{Envelope: 1, Total: 3, Chunk: []byte("abc")})))
	f.Add(appendFrame(nil, FrameData, FlagCompressed, StreamApplication, appendData(nil, FlagCompressed, dataFrame{Envelope: 2, Offset: 9, RawLen: 40, Chunk: []byte("zz")})))
	f.Add([]byte{1, 3, 0, 2, 0, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxFrame, maxMessage = wire.MinMaxFrame, wire.MinMaxMessage
		fr := newFrameReader(bytes.NewReader(b), maxFrame)
		for {
			fm, err := fr.read()
			if err != nil {
				return
			}
			switch fm.Type {
			case FrameData:
				d, err := parseData(fm.Header, fm.Payload, maxFrame, maxMessage)
				if err == nil {
					again := appendData(nil, fm.Flags, d)
					if !bytes.Equal(again, fm.Payload) {
						// Non-minimal uvarints decode but re-encode shorter; only
						// the decoded values must survive.
						d2, err := parseData(fm.Header, again, maxFrame, maxMessage)
						if err != nil || d2.Envelope != d.Envelope || d2.Offset != d.Offset || !bytes.Equal(d2.Chunk, d.Chunk) {
							t.Fatalf("data frame does not round-trip: %+v vs %+v (%v)", d, d2, err)
						}
					}
				}
			case FrameCredit:
				_, _ = parseCredit(fm.Header, fm.Payload)
			case FrameAbort:
				_, _ = parseUvarintPayload(fm.Header, fm.Payload)
			case FramePing, FramePong:
				_, _ = parsePing(fm.Header, fm.Payload)
			case FrameGoodbye:
				_, _ = parseGoodbye(fm.Header, fm.Payload)
			case FrameResume:
				_, _ = parseResume(fm.Header, fm.Payload)
			case FrameHello:
				_, _ = parseHello(fm.Payload)
			}
		}
	})
}
