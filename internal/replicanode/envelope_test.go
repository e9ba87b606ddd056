package replicanode

import (
	"errors"
	"reflect"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/ring"
)

func sampleEnvelope() []byte {
	a, b := ring.NodeID{Addr: "a", Incarnation: 1}, ring.NodeID{Addr: "b", Incarnation: 2}
	e := replica.Epoch{Term: 3, Node: a}
	var enc []byte
	var ends []int
	for _, m := range []replica.Message{
		{Type: replica.MsgPrepare, From: a, To: b, Key: key("x"), Epoch: e},
		{Type: replica.MsgAccept, From: a, To: b, Key: key("y"), Epoch: e, Records: []replica.Record{
			{Key: key("y"), Kind: replica.KindState, Epoch: e, Version: 7, Value: []byte("seven")},
		}},
	} {
		enc = replica.AppendEncode(enc, m)
		ends = append(ends, len(enc))
	}
	return appendEnvelope(nil, enc, ends)
}

func decodeAll(b []byte) ([]replica.Message, error) { return decodeEnvelope(b) }

func TestAnEnvelopeRoundTripsItsMessagesInOrder(t *testing.T) {
	got, err := decodeAll(sampleEnvelope())
	if err != nil || len(got) != 2 || got[0].Type != replica.MsgPrepare || string(got[1].Records[0].Value) != "seven" {
		t.Fatalf("decoded %+v, %v; want the prepare then the accept", got, err)
	}
}

func TestAnEnvelopeOfANewerVersionIsRefused(t *testing.T) {
	b := sampleEnvelope()
	b[0] = envelopeVersion + 1
	if _, err := decodeAll(b); !errors.Is(err, replica.ErrUnsupportedVersion) {
		t.Fatalf("a newer envelope: %v, want ErrUnsupportedVersion", err)
	}
}

func TestABadEnvelopeDeliversNothing(t *testing.T) {
	b := sampleEnvelope()
	for n := range len(b) {
		got, err := decodeAll(b[:n])
		var de *replica.DecodeError
		if !errors.As(err, &de) || len(got) != 0 {
			t.Fatalf("the first %d bytes: %d messages, %v; want none and a DecodeError", n, len(got), err)
		}
	}
	if got, err := decodeAll(append(b, 0)); !errors.Is(err, replica.ErrMalformed) || len(got) != 0 {
		t.Fatalf("a trailing byte: %d messages, %v; want none and ErrMalformed", len(got), err)
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(sampleEnvelope())
	f.Add([]byte{envelopeVersion, 0})
	f.Add([]byte{envelopeVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeAll(b)
		if err != nil {
			var de *replica.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var enc []byte
		var ends []int
		for _, m := range got {
			enc = replica.AppendEncode(enc, m)
			ends = append(ends, len(enc))
		}
		again, err := decodeAll(appendEnvelope(nil, enc, ends))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("a decoded envelope does not round-trip: %+v, %v", again, err)
		}
	})
}
