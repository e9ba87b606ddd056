package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

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
		{Type: MsgRefuse, From: b, To: a, Key: k, Epoch: e, Promised: Epoch{Term: 11, Node: a}, Floor: true},
		{Type: MsgSyncRequest, From: a, To: b, Round: 3, Range: ring.Range{Start: 1 << 40, End: 7}, Cursor: 1<<40 + 99, Limit: 1 << 20},
		{Type: MsgSyncChunk, From: b, To: a, Round: 3, Cursor: 1 << 41, Done: true, Records: []Record{
			{Key: k, Kind: KindPromise, Epoch: e},
			{Key: k, Kind: KindState, Epoch: e, Version: 42, Value: []byte("state")},
			{Key: Key{Type: "counter", ID: "other"}, Kind: KindContinuity, Name: "req-1", Epoch: e, Version: 3, Tombstone: true},
		}},
		{Type: MsgAcceptDelta, From: a, To: b, Key: k, Epoch: e, Version: 42, Delta: []byte{5, 2, 1, 1, 'X'},
			Records: []Record{{Key: k, Kind: KindState, Epoch: e, Version: 43}}},
		{Type: MsgAcceptNack, From: b, To: a, Key: k, Epoch: e, Version: 43, Counted: true},
		{Type: MsgSyncIndexRequest, From: a, To: b, Round: 4, Range: ring.Range{Start: 1 << 40, End: 7}, Cursor: 1<<40 + 99, Limit: 1 << 20},
		{Type: MsgSyncIndex, From: b, To: a, Round: 4, Counted: true, Cursor: 1 << 41, Records: []Record{
			{Key: k, Kind: KindPromise, Epoch: e},
			{Key: k, Kind: KindState, Epoch: e, Version: 42},
			{Key: Key{Type: "counter", ID: "other"}, Kind: KindContinuity, Name: "req-1", Epoch: e, Version: 3, Tombstone: true},
		}},
		// A fetch: the slots whose values an index listed.
		{Type: MsgSyncRequest, From: a, To: b, Round: 5, Range: ring.Range{Start: 1 << 40, End: 7}, Cursor: 1<<40 + 99, Limit: 1 << 20, Done: true, Records: []Record{
			{Key: k, Kind: KindState},
			{Key: Key{Type: "counter", ID: "other"}, Kind: KindContinuity, Name: "req-1"},
		}},
		{Type: MsgFence, From: a, To: b, Round: 4, Range: ring.Range{Start: 1 << 40, End: 7}, Epoch: Epoch{Term: 12}},
		{Type: MsgFenced, From: b, To: a, Round: 4, Range: ring.Range{Start: 1 << 40, End: 7}, Epoch: Epoch{Term: 12}, Promised: Epoch{Term: 11}, Counted: true},
		// An acquisition again above a floor names its first epoch.
		{Type: MsgPrepare, From: a, To: b, Key: k, Epoch: e, Promised: Epoch{Term: 3, Node: a}},
		// A prepare lists the members whose floors it passes (its sets
		// and the copiers its caller's view shows), and may name its
		// first epoch too.
		{Type: MsgPrepare, From: a, To: b, Key: k, Epoch: e, Reads: []ring.NodeID{a, b, {Addr: "x", Incarnation: 9}}},
		{Type: MsgPrepare, From: a, To: b, Key: k, Epoch: e, Promised: Epoch{Term: 3, Node: a}, Reads: []ring.NodeID{a}},
		// Floors that name departures: a fence for a leave, a refusal
		// naming its floor, a prepare that names members gone.
		{Type: MsgFence, From: a, To: b, Round: 7, Range: ring.Range{Start: 1 << 40, End: 7}, Epoch: Epoch{Term: 12, Node: a}, Gone: []ring.NodeID{{Addr: "c", Incarnation: 4}}},
		{Type: MsgFence, From: a, To: b, Round: 8, Range: ring.Range{Start: 1 << 40, End: 7}, Epoch: Epoch{Term: 12, Node: a}, Reads: []ring.NodeID{a, b}, Gone: []ring.NodeID{{Addr: "c", Incarnation: 4}, {Addr: "d"}, {Addr: "e"}, {Addr: "f"}, {Addr: "g"}}},
		{Type: MsgRefuse, From: b, To: a, Key: k, Epoch: e, Promised: Epoch{Term: 12, Node: a}, Floor: true, Gone: []ring.NodeID{{Addr: "c", Incarnation: 4}}},
		{Type: MsgRefuse, From: b, To: a, Key: k, Epoch: e, Promised: Epoch{Term: 12, Node: a}, Floor: true, Reads: []ring.NodeID{{Addr: "x1", Incarnation: 2}}},
		{Type: MsgRefuse, From: b, To: a, Key: k, Epoch: e, Promised: Epoch{Term: 12, Node: a}, Floor: true, Reads: []ring.NodeID{{Addr: "x1", Incarnation: 2}}, Gone: []ring.NodeID{{Addr: "c", Incarnation: 4}}},
		{Type: MsgPrepare, From: a, To: b, Key: k, Epoch: e, Reads: []ring.NodeID{a, b}, Gone: []ring.NodeID{{Addr: "c", Incarnation: 4}}},
		{Type: MsgPrepare, From: a, To: b, Key: k, Epoch: e, Promised: Epoch{Term: 3, Node: a}, Reads: []ring.NodeID{a}, Gone: []ring.NodeID{{Addr: "c", Incarnation: 4}}},
		{Type: MsgPrepare, From: a, To: b, Key: k, Epoch: e, Gone: []ring.NodeID{{Addr: "c", Incarnation: 4}}},
		{Type: MsgPrepare, From: a, To: b, Key: k, Epoch: e, Promised: Epoch{Term: 3, Node: a}, Gone: []ring.NodeID{{Addr: "c", Incarnation: 4}}},
		// A catch-up from every member reads sources still receiving.
		{Type: MsgSyncRequest, From: a, To: b, Round: 6, Range: ring.Range{Start: 1 << 40, End: 7}, Limit: 1 << 20, Partial: true},
		{Type: MsgSyncIndexRequest, From: a, To: b, Round: 7, Range: ring.Range{Start: 1 << 40, End: 7}, Limit: 1 << 20, Partial: true},
		{Type: MsgSyncRequest, From: a, To: b, Round: 8, Range: ring.Range{Start: 1 << 40, End: 7}, Cursor: 1<<40 + 99, Limit: 1 << 20, Done: true, Partial: true, Records: []Record{
			{Key: k, Kind: KindState},
		}},
		{Type: MsgSyncChunk, From: b, To: a, Round: 6, Cursor: 1 << 41, Recovering: true, Records: []Record{
			{Key: k, Kind: KindState, Epoch: e, Version: 42, Value: []byte("state")},
		}},
		{Type: MsgSyncIndex, From: b, To: a, Round: 7, Done: true, Recovering: true},
		// A source that waits on its requester alone answers anyway.
		{Type: MsgSyncChunk, From: b, To: a, Round: 9, Cursor: 1 << 41, Cycle: true, Records: []Record{
			{Key: k, Kind: KindState, Epoch: e, Version: 42, Value: []byte("state")},
		}},
		{Type: MsgSyncIndex, From: b, To: a, Round: 10, Done: true, Cycle: true},
		{Type: MsgFenced, From: b, To: a, Round: 5, Range: ring.Range{Start: 1 << 40, End: 7}, Epoch: Epoch{Term: 12}, Promised: Epoch{Term: 11}, Cycle: true},
		// A copy that reads all its sources names them.
		{Type: MsgFence, From: a, To: b, Round: 6, Range: ring.Range{Start: 1 << 40, End: 7}, Epoch: Epoch{Term: 12, Node: a}, Reads: []ring.NodeID{a, b}},
		{Type: MsgSyncIndexRequest, From: a, To: b, Round: 11, Range: ring.Range{Start: 1 << 40, End: 7}, Limit: 1 << 20, Reads: []ring.NodeID{b}},
		{Type: MsgSyncRequest, From: a, To: b, Round: 12, Range: ring.Range{Start: 1 << 40, End: 7}, Limit: 1 << 20, Partial: true, Reads: []ring.NodeID{a, b, {Addr: "c", Incarnation: 1}, {Addr: "d"}, {Addr: "e"}}},
		// Collecting tombstones: the forget messages, a promise naming
		// the replica's horizon, an owner writing its horizon back, and
		// a catch-up carrying one (a dated tombstone is whole in an
		// index).
		{Type: MsgForget, From: a, To: b, Key: k, Epoch: e, Version: 44},
		{Type: MsgForgotten, From: b, To: a, Key: k, Epoch: e, Version: 44, Counted: true},
		{Type: MsgPromise, From: b, To: a, Key: k, Epoch: e, Promised: Epoch{Term: 8, Node: b}, Version: 3, Counted: true, Records: []Record{
			{Key: k, Kind: KindState, Epoch: Epoch{Term: 8, Node: b}, Version: 4, Tombstone: true, Value: []byte{0, 0, 1, 2, 3, 4, 5, 6}},
		}},
		{Type: MsgAccept, From: a, To: b, Key: k, Epoch: e, Records: []Record{horizonRecord(k, e, 2, Horizon{Epoch: Epoch{Term: 8, Node: b}, Version: 3})}},
		{Type: MsgSyncChunk, From: b, To: a, Round: 13, Cursor: 1 << 41, Done: true, Records: []Record{
			PromiseRecord(k, e, Horizon{Epoch: Epoch{Term: 8, Node: b}, Version: 3}),
		}},
		{Type: MsgSyncIndex, From: b, To: a, Round: 14, Cursor: 1 << 41, Records: []Record{
			PromiseRecord(k, e, Horizon{Epoch: Epoch{Term: 8, Node: b}, Version: 3}),
			{Key: k, Kind: KindState, Epoch: e, Version: 5, Tombstone: true, Value: []byte{0, 0, 1, 2, 3, 4, 5, 6}},
		}},
	}
}

// horizonRecord is the record of an owner's accept that writes horizon h
// back: a promise record at the owner's epoch and version.
func horizonRecord(k Key, e Epoch, version uint64, h Horizon) Record {
	r := PromiseRecord(k, e, h)
	r.Version = version
	return r
}

// needsVersion6 reports whether m is a message of tombstone collection.
func needsVersion6(m Message) bool {
	if m.Type == MsgForget || m.Type == MsgForgotten || (m.Type == MsgPromise && !m.Promised.IsZero()) {
		return true
	}
	for _, r := range m.Records {
		if r.Kind == KindPromise && r.Value != nil {
			return true
		}
	}
	return false
}

// A message is encoded in its type's version only: the catch-up messages
// in version 2, the delta accept path and the index messages of a
// catch-up in version 3, the fence messages, a refusal naming a floor and
// a prepare naming an epoch in version 4, a partial catch-up request and
// an answer from a recovering source in version 5, the messages of
// tombstone collection in version 6, a prepare listing the members whose
// floors it passes in version 7, a message naming departures (Gone) in
// version 8, the others in version 1, so a binary that knows an older
// version refuses a newer message as newer and one message has one
// encoding.
func TestEachTypeHasItsOwnFormatVersion(t *testing.T) {
	for _, m := range sampleMessages() {
		b := AppendEncode(nil, m)
		want := byte(1)
		switch {
		case len(m.Gone) > 0 || (m.Type == MsgRefuse && len(m.Reads) > 0):
			want = 8
		case m.Type == MsgPrepare && len(m.Reads) > 0:
			want = 7
		case needsVersion6(m):
			want = 6
		case m.Partial || m.Recovering || m.Cycle || len(m.Reads) > 0:
			want = 5
		case m.Type == MsgSyncRequest || m.Type == MsgSyncChunk:
			want = 2
		case m.Type == MsgFence || m.Type == MsgFenced || m.Floor || (m.Type == MsgPrepare && !m.Promised.IsZero()):
			want = 4
		case m.Type == MsgAcceptDelta || m.Type == MsgAcceptNack || m.Type == MsgSyncIndexRequest || m.Type == MsgSyncIndex:
			want = 3
		}
		if b[0] != want {
			t.Fatalf("%v encodes in version %d, want %d", m.Type, b[0], want)
		}
		for v := byte(1); v <= FormatVersion; v++ {
			if v == want {
				continue
			}
			b[0] = v
			if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v in version %d decoded with %v, want ErrMalformed", m.Type, v, err)
			}
		}
	}
}

// An accept-delta carries exactly one record, without a value of its own
// (the edit stands for it) and not a tombstone; an accept-nack carries
// none.
func TestDecodeRefusesDeltaMessagesWithRecordsTheyCannotCarry(t *testing.T) {
	var delta, nack Message
	for _, m := range sampleMessages() {
		switch m.Type {
		case MsgAcceptDelta:
			delta = m
		case MsgAcceptNack:
			nack = m
		}
	}
	withValue := delta
	withValue.Records = []Record{delta.Records[0]}
	withValue.Records[0].Value = []byte("v")
	tomb := delta
	tomb.Records = []Record{delta.Records[0]}
	tomb.Records[0].Tombstone = true
	none := delta
	none.Records = nil
	two := delta
	two.Records = []Record{delta.Records[0], delta.Records[0]}
	nackWith := nack
	nackWith.Records = delta.Records
	for what, m := range map[string]Message{"a value": withValue, "a tombstone": tomb, "no record": none, "two records": two, "a nack with a record": nackWith} {
		if _, err := Decode(AppendEncode(nil, m)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("a delta message with %s decoded with %v, want ErrMalformed", what, err)
		}
	}
}

// An index request asks for records and carries none; an index lists
// records without their values.
func TestDecodeRefusesIndexMessagesWithWhatTheyCannotCarry(t *testing.T) {
	k := Key{Type: "t", ID: "x"}
	rec := Record{Key: k, Kind: KindState, Epoch: Epoch{Term: 1}, Version: 1}
	b := AppendEncode(nil, Message{Type: MsgSyncIndexRequest, Records: []Record{rec}})
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an index request carrying a record decoded with %v, want ErrMalformed", err)
	}
	rec.Value = []byte("v")
	b = AppendEncode(nil, Message{Type: MsgSyncIndex, Records: []Record{rec}})
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an index record with a value decoded with %v, want ErrMalformed", err)
	}
}

// A fence carries no records: one message, one encoding.
func TestDecodeRefusesAFenceWithRecords(t *testing.T) {
	m := Message{Type: MsgFence, Range: ring.Range{Start: 1, End: 2}, Epoch: Epoch{Term: 3}, Records: []Record{{Kind: KindState, Version: 1}}}
	if _, err := Decode(AppendEncode(nil, m)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a fence with a record decoded with %v, want ErrMalformed", err)
	}
}

// Only a catch-up chunk carries promises, and a promise carries nothing
// but its epoch.
func TestDecodeRefusesPromisesOutsideAChunkAndPromisesWithValues(t *testing.T) {
	k := Key{Type: "t", ID: "x"}
	promise := Record{Key: k, Kind: KindPromise, Epoch: Epoch{Term: 1}}
	b := AppendEncode(nil, Message{Type: MsgPromise, Key: k, Records: []Record{promise}})
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a promise message carrying a promise record decoded with %v, want ErrMalformed", err)
	}
	promise.Value = []byte("v")
	b = AppendEncode(nil, Message{Type: MsgSyncChunk, Records: []Record{promise}})
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a chunk's promise with a value that is no horizon decoded with %v, want ErrMalformed", err)
	}
	h := horizonRecord(k, Epoch{Term: 2}, 0, Horizon{Epoch: Epoch{Term: 1}, Version: 4})
	h.Version = 5
	b = AppendEncode(nil, Message{Type: MsgSyncChunk, Records: []Record{h}})
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a chunk's promise with a version decoded with %v, want ErrMalformed", err)
	}
	h.Value = nil
	b = AppendEncode(nil, Message{Type: MsgAccept, Key: k, Epoch: Epoch{Term: 2}, Records: []Record{h}})
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an accept of a promise without a horizon decoded with %v, want ErrMalformed", err)
	}
	b = AppendEncode(nil, Message{Type: MsgForget, Key: k, Epoch: Epoch{Term: 2}, Version: 3, Records: []Record{{Key: k, Kind: KindState, Tombstone: true}}})
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a forget with a record decoded with %v, want ErrMalformed", err)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b := AppendEncode(nil, m)
		if len(b) > EncodedLenBound(m) {
			t.Fatalf("%v encodes in %d bytes, EncodedLenBound says at most %d", m.Type, len(b), EncodedLenBound(m))
		}
		got, err := Decode(b)
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
		var m Message
		var err error
		if n := allocated(func() { m, err = Decode(b) }); n > maxAllocPerByte*uint64(len(b))+allocSlack {
			t.Fatalf("decoding %d bytes allocated %d bytes, want at most %d per byte", len(b), n, maxAllocPerByte)
		}
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
		if len(b) > EncodedLenBound(m) {
			t.Fatalf("%d bytes decoded to a message EncodedLenBound puts at %d", len(b), EncodedLenBound(m))
		}
	})
}

// The decoder's count checks rest on these being the shortest encodings.
func TestShortestEncodings(t *testing.T) {
	if n := len(AppendEncode(nil, Message{Type: MsgPrepare})); n != MinMessageLen {
		t.Fatalf("the shortest message encodes in %d bytes, MinMessageLen is %d", n, MinMessageLen)
	}
	if n := len(appendRecordBody(nil, Record{Kind: KindState})); n != minRecordLen {
		t.Fatalf("the shortest record encodes in %d bytes, minRecordLen is %d", n, minRecordLen)
	}
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxAllocPerByte bounds what decoding may allocate per input byte (a
// record is 128 bytes in memory and 8 at its shortest), plus allocSlack
// for the error and the first allocations.
const (
	maxAllocPerByte = 40
	allocSlack      = 16 << 10
)

// A record count that lies (as many records as the bytes could hold, each
// of them garbage) is refused without allocating for it.
func TestDecodeOfALyingCountAllocatesLittle(t *testing.T) {
	m := sampleMessages()[0]
	b := AppendEncode(nil, m)
	const body = 4 << 20
	b = binary.AppendUvarint(b[:len(b)-1], body/minRecordLen)
	b = append(b, make([]byte, body)...) // kind 0: malformed at the first record
	var err error
	got := allocated(func() { _, err = Decode(b) })
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("decoded with %v, want ErrMalformed", err)
	}
	if got > allocSlack {
		t.Fatalf("a lying record count allocated %d bytes before failing, want at most %d", got, allocSlack)
	}
}

// A promise of many of the shortest records allocates in proportion to
// its size.
func TestDecodeOfManyShortRecordsAllocatesInProportion(t *testing.T) {
	m := Message{Type: MsgPromise, Records: make([]Record, 100000)}
	for i := range m.Records {
		m.Records[i].Kind = KindState
	}
	b := AppendEncode(nil, m)
	var err error
	got := allocated(func() { _, err = Decode(b) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes allocated %d (%.1f per byte)", len(b), got, float64(got)/float64(len(b)))
	if limit := maxAllocPerByte*uint64(len(b)) + allocSlack; got > limit {
		t.Fatalf("decoding %d bytes allocated %d, want at most %d", len(b), got, limit)
	}
}

// Messages decoded with one Names share the addresses and actor types
// they repeat (one string each), and decode as without it.
func TestMessagesDecodedWithNamesShareTheirRepeatedNames(t *testing.T) {
	accept := sampleMessages()[2]
	accepted := sampleMessages()[3]
	var names Names
	got := make([]Message, 0, 2)
	for _, m := range []Message{accept, accepted} {
		d, err := DecodeNames(AppendEncode(nil, m), &names)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d, m) {
			t.Fatalf("decoded with names:\n%+v\nwant\n%+v", d, m)
		}
		got = append(got, d)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(got[0].From.Addr, got[0].Epoch.Node.Addr) || !same(got[0].From.Addr, got[0].Records[0].Epoch.Node.Addr) {
		t.Error("an accept's sender and epoch hold the same address in different strings")
	}
	if !same(got[0].From.Addr, got[1].To.Addr) || !same(got[0].To.Addr, got[1].From.Addr) || !same(got[0].Key.Type, got[1].Key.Type) {
		t.Error("two messages decoded with one Names hold the same names in different strings")
	}
}

// A refusal lists members only when it names a floor: one that does not,
// with the list's flag, is malformed (its encoder would drop the list).
func TestDecodeRefusesARefusalListingMembersWithoutAFloor(t *testing.T) {
	m := Message{Type: MsgRefuse, From: ring.NodeID{Addr: "b"}, To: ring.NodeID{Addr: "a"}, Key: Key{Type: "t", ID: "k"},
		Epoch: Epoch{Term: 2}, Promised: Epoch{Term: 12, Node: ring.NodeID{Addr: "x"}}, Floor: true, Reads: []ring.NodeID{{Addr: "c", Incarnation: 1}}}
	b := AppendEncode(nil, m)
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
	b[2] &^= flagFloor
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a refusal listing members without a floor decoded with %v, want ErrMalformed", err)
	}
}
