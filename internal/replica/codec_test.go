package replica

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/troupe-go/troupe/ring"
)

func sampleMessages() []Message {
	a := ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 17}
	b := ring.NodeID{Addr: "10.0.0.2:7400", Incarnation: 3}
	e := Epoch{Term: 9, Node: a}
	k := Key{Type: "counter", ID: "page-views"}
	return []Message{
		{Type: MsgPrepare, From: a, To: b, Key: k, Epoch: e},
		{Type: MsgPromise, From: b, To: a, Key: k, Epoch: e, Counted: true, Records: []Record{
			{Key: k, Kind: KindState, Epoch: Epoch{Term: 8, Node: b}, Version: 41, Value: []byte{1, 2, 3}},
			{Key: k, Kind: KindContinuity, Name: "req-7", Epoch: Epoch{Term: 7, Node: b}, Version: 2, Tombstone: true},
		}},
		{Type: MsgAccept, From: a, To: b, Key: k, Epoch: e, Records: []Record{{Key: k, Kind: KindState, Epoch: e, Version: 42, Value: []byte("state")}}},
		{Type: MsgAccepted, From: b, To: a, Key: k, Epoch: e, Version: 42, Counted: true},
		{Type: MsgCheck, From: a, To: b, Key: k, Epoch: e, Round: 7},
		{Type: MsgChecked, From: b, To: a, Key: k, Epoch: e, Round: 7},
		{Type: MsgRefuse, From: b, To: a, Key: k, Epoch: e, Promised: Epoch{Term: 10, Node: b}},
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		got, err := Decode(AppendEncode(nil, m))
		if err != nil {
			t.Fatalf("%v: %v", m.Type, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%v decoded as\n%+v\nwant\n%+v", m.Type, got, m)
		}
	}
}

func TestDecodeRefusesNewerVersion(t *testing.T) {
	b := AppendEncode(nil, sampleMessages()[0])
	b[0] = FormatVersion + 1
	if _, err := Decode(b); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("a newer format decoded with %v, want ErrUnsupportedVersion", err)
	}
}

func TestDecodeReportsTruncationAndGarbage(t *testing.T) {
	b := AppendEncode(nil, sampleMessages()[1])
	for i := range len(b) {
		if _, err := Decode(b[:i]); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("a message cut at %d of %d bytes decoded with %v, want ErrTruncated or ErrMalformed", i, len(b), err)
		}
	}
	var de *DecodeError
	if _, err := Decode(append(bytes.Clone(b), 0)); !errors.Is(err, ErrMalformed) || !errors.As(err, &de) || de.Offset != len(b) {
		t.Fatalf("trailing bytes decoded with %v, want ErrMalformed at %d", err, len(b))
	}
	bad := bytes.Clone(b)
	bad[1] = byte(maxMsgType) + 1
	if _, err := Decode(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an unknown type decoded with %v, want ErrMalformed", err)
	}
}

// A declared record count far beyond the bytes present is refused before
// anything is allocated for it.
func TestDecodeRefusesACountLargerThanTheInput(t *testing.T) {
	m := sampleMessages()[0]
	b := AppendEncode(nil, m)
	b = append(b[:len(b)-1], 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a huge record count decoded with %v, want ErrMalformed", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(AppendEncode(nil, m))
	}
	f.Add([]byte{})
	f.Add([]byte{FormatVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !(errors.Is(err, ErrTruncated) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnsupportedVersion)) {
				t.Fatalf("untyped decode error %v", err)
			}
			return
		}
		// What decodes encodes back to the same bytes: the format has one
		// encoding per message.
		if again := AppendEncode(nil, m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}
