package replicanode

import (
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
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

// syncEnvelope is an envelope of the catch-up messages, which travel
// one per envelope.
func syncEnvelope(m replica.Message) []byte {
	enc := replica.AppendEncode(nil, m)
	return appendEnvelope(nil, enc, []int{len(enc)})
}

func sampleSyncEnvelopes() [][]byte {
	a, b := ring.NodeID{Addr: "a", Incarnation: 1}, ring.NodeID{Addr: "b", Incarnation: 2}
	e := replica.Epoch{Term: 3, Node: a}
	return [][]byte{
		syncEnvelope(replica.Message{Type: replica.MsgSyncRequest, From: a, To: b, Round: 1, Range: ring.Range{Start: 5, End: 9}, Cursor: 5, Limit: 1 << 20}),
		syncEnvelope(replica.Message{Type: replica.MsgSyncChunk, From: b, To: a, Round: 1, Counted: true, Cursor: 7, Records: []replica.Record{
			{Key: key("x"), Kind: replica.KindPromise, Epoch: e},
			{Key: key("x"), Kind: replica.KindState, Epoch: e, Version: 2, Value: []byte("two")},
		}}),
	}
}

func TestCatchUpEnvelopesRoundTrip(t *testing.T) {
	for _, env := range sampleSyncEnvelopes() {
		got, err := decodeAll(env)
		if err != nil || len(got) != 1 || !(got[0].Type == replica.MsgSyncRequest || got[0].Type == replica.MsgSyncChunk) {
			t.Fatalf("decoded %+v, %v; want one catch-up message", got, err)
		}
	}
}

// deltaEnvelope is an envelope of a delta accept and a nack.
func deltaEnvelope() []byte {
	a, b := ring.NodeID{Addr: "a", Incarnation: 1}, ring.NodeID{Addr: "b", Incarnation: 2}
	e := replica.Epoch{Term: 3, Node: a}
	var enc []byte
	var ends []int
	for _, m := range []replica.Message{
		{Type: replica.MsgAcceptDelta, From: a, To: b, Key: key("y"), Epoch: e, Version: 7, Delta: []byte{5, 1, 1, 1, 'X'},
			Records: []replica.Record{{Key: key("y"), Kind: replica.KindState, Epoch: e, Version: 8}}},
		{Type: replica.MsgAcceptNack, From: b, To: a, Key: key("y"), Epoch: e, Version: 8, Counted: true},
	} {
		enc = replica.AppendEncode(enc, m)
		ends = append(ends, len(enc))
	}
	return appendEnvelope(nil, enc, ends)
}

// A delta accept's edit is copied out of the envelope, whose buffer goes
// back to the transport once decoded.
func TestDeltaMessagesCrossAnEnvelopeAndOwnTheirEdit(t *testing.T) {
	b := deltaEnvelope()
	got, err := decodeAll(b)
	if err != nil || len(got) != 2 || got[0].Type != replica.MsgAcceptDelta || got[1].Type != replica.MsgAcceptNack {
		t.Fatalf("decoded %+v, %v; want the delta accept then the nack", got, err)
	}
	clear(b)
	if string(got[0].Delta) != "\x05\x01\x01\x01X" {
		t.Fatalf("the decoded edit changed with the envelope's buffer: %x", got[0].Delta)
	}
}

// sampleFenceEnvelopes returns envelopes of one fence message each.
func sampleFenceEnvelopes() [][]byte {
	a, b := ring.NodeID{Addr: "a", Incarnation: 1}, ring.NodeID{Addr: "b", Incarnation: 2}
	return [][]byte{
		syncEnvelope(replica.Message{Type: replica.MsgFence, From: a, To: b, Round: 4, Range: ring.Range{Start: 5, End: 9}, Epoch: replica.Epoch{Term: 6}}),
		syncEnvelope(replica.Message{Type: replica.MsgFenced, From: b, To: a, Round: 4, Range: ring.Range{Start: 5, End: 9}, Epoch: replica.Epoch{Term: 6}, Promised: replica.Epoch{Term: 3}, Counted: true}),
	}
}

func TestFenceEnvelopesRoundTrip(t *testing.T) {
	for _, env := range sampleFenceEnvelopes() {
		got, err := decodeAll(env)
		if err != nil || len(got) != 1 || !(got[0].Type == replica.MsgFence || got[0].Type == replica.MsgFenced) || got[0].Round != 4 || got[0].Epoch.Term != 6 {
			t.Fatalf("decoded %+v, %v; want one fence message", got, err)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(sampleEnvelope())
	f.Add(deltaEnvelope())
	for _, env := range sampleSyncEnvelopes() {
		f.Add(env)
	}
	for _, env := range sampleFenceEnvelopes() {
		f.Add(env)
	}
	f.Add([]byte{envelopeVersion, 0})
	f.Add([]byte{envelopeVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []replica.Message
		var err error
		if n := allocated(func() { got, err = decodeAll(b) }); n > maxAllocPerByte*uint64(len(b))+allocSlack {
			t.Fatalf("decoding %d bytes allocated %d bytes, want at most %d per byte", len(b), n, maxAllocPerByte)
		}
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

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxAllocPerByte bounds what decoding an envelope may allocate per input
// byte (a message is about 200 bytes in memory and 19 at its shortest,
// and the slice of them grows by doubling), plus allocSlack for the error
// and the first allocations.
const (
	maxAllocPerByte = 40
	allocSlack      = 16 << 10
)

// An envelope whose count lies (as many messages as the bytes could hold,
// each of them garbage) is refused without allocating for them.
func TestAnEnvelopeWithALyingCountAllocatesLittle(t *testing.T) {
	const body = 4 << 20
	b := []byte{envelopeVersion}
	b = binary.AppendUvarint(b, body/(1+replica.MinMessageLen))
	b = append(b, make([]byte, body)...) // empty messages: truncated at the first
	var err error
	got := allocated(func() { _, err = decodeEnvelope(b) })
	if err == nil {
		t.Fatal("an envelope of garbage decoded")
	}
	if got > allocSlack {
		t.Fatalf("a lying envelope count allocated %d bytes before failing, want at most %d", got, allocSlack)
	}
}

// An envelope of many of the shortest messages allocates in proportion
// to its size.
func TestAnEnvelopeOfShortMessagesAllocatesInProportion(t *testing.T) {
	enc := replica.AppendEncode(nil, replica.Message{Type: replica.MsgPrepare})
	var all []byte
	var ends []int
	for range 50000 {
		all = append(all, enc...)
		ends = append(ends, len(all))
	}
	b := appendEnvelope(nil, all, ends)
	var err error
	got := allocated(func() { _, err = decodeEnvelope(b) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes allocated %d (%.1f per byte)", len(b), got, float64(got)/float64(len(b)))
	if limit := maxAllocPerByte*uint64(len(b)) + allocSlack; got > limit {
		t.Fatalf("decoding %d bytes allocated %d, want at most %d", len(b), got, limit)
	}
}
