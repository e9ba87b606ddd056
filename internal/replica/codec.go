package replica

import (
	"encoding/binary"
	"slices"

	"github.com/troupe-go/troupe/ring"
)

// FormatVersion is the newest message format version, the first byte of
// every encoded message. A message is encoded in the oldest version that
// can express it: version 1 for the replication messages, version 2 for
// the catch-up messages (MsgSyncRequest, MsgSyncChunk), version 3 for the
// delta accept path (MsgAcceptDelta, MsgAcceptNack) and the index of a
// catch-up (MsgSyncIndexRequest, MsgSyncIndex), version 4 for the fence
// messages (MsgFence, MsgFenced), a refusal that names a floor (Floor)
// and a prepare that names an epoch (Promised: an acquisition again above
// a floor, which a replica that ignored the epoch would let pass), so a
// binary that knows an older version refuses the newer
// messages with ErrUnsupportedVersion, and version 5 for a partial
// catch-up request (Partial), an answer from a source recovering
// (Recovering) and an answer or fenced from a source that waits on its
// requester alone (Cycle), and version 6 for tombstone collection: the
// forget messages (MsgForget, MsgForgotten), a promise that names a
// horizon (Promised) and any message with a promise record that carries
// one (its Value: an accept of an owner's horizon, a catch-up's chunk
// or index), and version 7 for a prepare that lists the members whose
// floors it passes (Reads), and version 8 for floors that name
// departures and earlier copiers (Gone on a fence, a refusal naming a
// floor and a prepare; Reads on a refusal naming a floor). A
// decoder refuses a version above FormatVersion, and a message in a
// version other than its own.
const FormatVersion = 8

// carriesGone reports whether m's Gone is encoded: on a fence, a
// refusal naming a floor and a prepare.
func carriesGone(m Message) bool {
	return len(m.Gone) > 0 && (m.Type == MsgFence || m.Type == MsgPrepare || (m.Type == MsgRefuse && m.Floor))
}

// floorCopiers reports whether m is a refusal naming a floor with earlier
// copiers (Reads), which needs version 8.
func floorCopiers(m Message) bool {
	return m.Type == MsgRefuse && m.Floor && len(m.Reads) > 0
}

// versionOf returns the version m is encoded in.
func versionOf(m Message) byte {
	if carriesGone(m) || floorCopiers(m) {
		return 8
	}
	if m.Type == MsgPrepare && len(m.Reads) > 0 {
		return 7
	}
	if m.Type == MsgForget || m.Type == MsgForgotten || (m.Type == MsgPromise && (!m.Promised.IsZero() || m.Version != 0)) ||
		slices.ContainsFunc(m.Records, func(r Record) bool { return r.Kind == KindPromise && r.Value != nil }) {
		return 6
	}
	return layoutOf(m)
}

// layoutOf returns the version whose layout m takes: its version, but for
// version 6, which lays a message out as the version before it would,
// version 7, a prepare laid out as version 4 with Reads, and version 8,
// laid out as the message without Gone would be.
func layoutOf(m Message) byte {
	switch {
	case m.Type == MsgPrepare && (len(m.Reads) > 0 || len(m.Gone) > 0):
		return 4
	case ((m.Partial || len(m.Reads) > 0) && m.Type.isSyncRequest()) || ((m.Recovering || m.Cycle) && m.Type.isSyncAnswer()) ||
		(m.Cycle && m.Type == MsgFenced) || (len(m.Reads) > 0 && m.Type == MsgFence):
		return 5
	case m.Type.isFence() || (m.Type == MsgRefuse && m.Floor) || (m.Type == MsgPrepare && !m.Promised.IsZero()):
		return 4
	case m.Type.isDelta() || m.Type == MsgSyncIndexRequest || m.Type == MsgSyncIndex:
		return 3
	case m.Type.isSync():
		return 2
	}
	return 1
}

// The encoding, in order: version byte, type byte, flags byte (bit 0:
// Counted), From, To, Key (type, id), Epoch, Promised, Version, Round, the
// record count and the records. A NodeID is a string then a uvarint
// incarnation; an Epoch is a uvarint term then a NodeID; a string or byte
// slice is a uvarint length then the bytes. A record is its kind byte, its
// flags byte (bit 0: Tombstone), its Name, its Epoch, a uvarint Version and
// its Value; its Key is the message's.
//
// Version 2 (the catch-up messages) adds, after Round: Range (Start, End)
// and Cursor as uvarint tokens and Limit as a uvarint; its flags byte has
// bit 1 for Done; and each record starts with its own Key (type, id),
// since a chunk spans many keys, and may be a promise (then only its Epoch
// is set).
//
// Version 3 (the delta accept path) is version 1's layout; an accept-delta
// adds, after Round, its Delta (a uvarint length, then the edit) and
// carries exactly one record, neither a tombstone nor with a value; an
// accept-nack carries no record.
//
// The index messages of version 3 are laid out as version 2. A
// MsgSyncIndexRequest has no records; a MsgSyncIndex's records have empty
// values.
//
// Version 4 (the fence messages, a refusal naming a floor and a prepare
// naming an epoch) has the layout of version 2 without the Done flag and
// without records (their count is 0); its flags byte has bit 2 for Floor,
// set on every refusal of version 4; a prepare of version 4 has a
// Promised that is not zero, one of version 1 a zero one.
//
// Version 5 (a partial catch-up request: MsgSyncRequest or
// MsgSyncIndexRequest with Partial; an answer, MsgSyncChunk or
// MsgSyncIndex, with Recovering) has the layout of version 2 (of version
// 3 for the index messages; of version 4 for a fenced with Cycle); its
// flags byte has bit 3 for Partial, set on every request of version 5,
// bit 4 for Recovering and bit 5 for Cycle, one of which is set on every
// answer of version 5, and Cycle on every fenced of version 5. A request
// or a fence of version 5 may carry Reads (bit 6): after Limit, a uvarint
// count (at least 1) and the nodes; a fence of version 5 always does.
//
// Version 7 (a prepare that lists the members whose floors it passes)
// has the layout of version 4 with Reads (bit 6) after Limit, as a
// fence of version 5 carries them, and a Promised that may be zero.
//
// Version 8 (floors that name departures and earlier copiers) lays a
// fence, a refusal naming a floor or a prepare out as it would be without
// Gone, with Gone (bit 7) after Reads: a uvarint count (at least 1) and
// the nodes; a refusal naming a floor may carry Reads (bit 6), its
// earlier copiers, too. Every message of version 8 has one of them.
//
// Version 6 lays each message out as the version before it would (the
// forget messages as version 1). A promise record of version 6 may carry
// a Value, the horizon (an Epoch, then a uvarint version); in an accept,
// it stands for the owner's horizon and carries its Epoch and Version as
// a record does. A promise of version 6 names the replica's horizon in
// Promised and Version. The forget messages carry no records. An index of version 3 or 6 keeps the values
// of tombstones and promises (they are whole as listed).

const (
	flagCounted   = 1
	flagDone      = 2
	flagFloor     = 4
	flagPartial   = 8
	flagRecover   = 16
	flagCycle     = 32
	flagReads     = 64
	flagGone      = 128
	flagTombstone = 1
)

// The shortest encodings: every string empty and every integer one byte.
// A declared count is checked against them, so a count is never larger
// than the input could hold.
const (
	// MinMessageLen is the length of the shortest encoded message.
	MinMessageLen = 18
	// minRecordLen is the length of the shortest encoded record.
	minRecordLen = 8
	// maxPresize is the largest record count that sizes an allocation
	// before the records were parsed: a decoded record takes 16 times its
	// shortest encoding in memory, so a larger count is first checked by
	// parsing the records without keeping them.
	maxPresize = 4
)

// AppendEncode appends the encoding of m to b.
func AppendEncode(b []byte, m Message) []byte {
	var flags byte
	if m.Counted {
		flags |= flagCounted
	}
	sync := m.Type.isSync()
	if sync && m.Done {
		flags |= flagDone
	}
	if m.Type == MsgRefuse && m.Floor {
		flags |= flagFloor
	}
	if m.Partial && m.Type.isSyncRequest() {
		flags |= flagPartial
	}
	if m.Recovering && m.Type.isSyncAnswer() {
		flags |= flagRecover
	}
	if m.Cycle && (m.Type.isSyncAnswer() || m.Type == MsgFenced) {
		flags |= flagCycle
	}
	reads := len(m.Reads) > 0 && (m.Type.isSyncRequest() || m.Type == MsgFence || m.Type == MsgPrepare || floorCopiers(m))
	if reads {
		flags |= flagReads
	}
	gone := carriesGone(m)
	if gone {
		flags |= flagGone
	}
	v, lv := versionOf(m), layoutOf(m)
	b = append(b, v, byte(m.Type), flags)
	b = appendNode(b, m.From)
	b = appendNode(b, m.To)
	b = appendString(b, m.Key.Type)
	b = appendString(b, m.Key.ID)
	b = appendEpoch(b, m.Epoch)
	b = appendEpoch(b, m.Promised)
	b = binary.AppendUvarint(b, m.Version)
	b = binary.AppendUvarint(b, m.Round)
	if m.Type == MsgAcceptDelta {
		b = binary.AppendUvarint(b, uint64(len(m.Delta)))
		b = append(b, m.Delta...)
	}
	if sync || lv >= 4 {
		b = binary.AppendUvarint(b, uint64(m.Range.Start))
		b = binary.AppendUvarint(b, uint64(m.Range.End))
		b = binary.AppendUvarint(b, uint64(m.Cursor))
		b = binary.AppendUvarint(b, m.Limit)
	}
	if reads {
		b = appendNodes(b, m.Reads)
	}
	if gone {
		b = appendNodes(b, m.Gone)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Records)))
	for _, r := range m.Records {
		if sync {
			b = appendString(b, r.Key.Type)
			b = appendString(b, r.Key.ID)
		}
		b = appendRecordBody(b, r)
	}
	return b
}

// EncodedLenBound returns at least the bytes AppendEncode appends for m,
// so that a buffer sized by it takes a large message (a catch-up chunk)
// without growing: each growth copies and clears what is already there.
func EncodedLenBound(m Message) int {
	const v = binary.MaxVarintLen64
	node := func(n ring.NodeID) int { return v + len(n.Addr) + v }
	epoch := func(e Epoch) int { return v + node(e.Node) }
	n := 3 + node(m.From) + node(m.To) + 2*v + len(m.Key.Type) + len(m.Key.ID) +
		epoch(m.Epoch) + epoch(m.Promised) + 2*v + v + len(m.Delta) + 4*v + v + v
	for _, id := range m.Reads {
		n += node(id)
	}
	n += v
	for _, id := range m.Gone {
		n += node(id)
	}
	for _, r := range m.Records {
		n += 2*v + len(r.Key.Type) + len(r.Key.ID) + 2 + v + len(r.Name) + epoch(r.Epoch) + 2*v + len(r.Value)
	}
	return n
}

// appendRecordBody appends r without its key.
func appendRecordBody(b []byte, r Record) []byte {
	var flags byte
	if r.Tombstone {
		flags |= flagTombstone
	}
	b = append(b, byte(r.Kind), flags)
	b = appendString(b, r.Name)
	b = appendEpoch(b, r.Epoch)
	b = binary.AppendUvarint(b, r.Version)
	b = binary.AppendUvarint(b, uint64(len(r.Value)))
	return append(b, r.Value...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendNodes appends a uvarint count, then the nodes.
func appendNodes(b []byte, ids []ring.NodeID) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = appendNode(b, id)
	}
	return b
}

func appendNode(b []byte, n ring.NodeID) []byte {
	b = appendString(b, n.Addr)
	return binary.AppendUvarint(b, n.Incarnation)
}

func appendEpoch(b []byte, e Epoch) []byte {
	b = binary.AppendUvarint(b, e.Term)
	return appendNode(b, e.Node)
}

// Decode decodes one message. Every declared length is checked against
// the bytes present before anything is allocated. Errors are
// *DecodeError, matching ErrUnsupportedVersion, ErrTruncated or
// ErrMalformed.
func Decode(b []byte) (Message, error) {
	var names Names
	return DecodeNames(b, &names)
}

// Names shares, between the messages decoded with it, the strings they
// repeat: member addresses and actor types (an envelope's messages name
// the same few). Its zero value is ready; it keeps the first names it
// meets, up to eight.
type Names struct {
	s [8]string
	n int
}

// intern returns b as a string, shared with an equal one met before.
func (ns *Names) intern(b []byte) string {
	for _, s := range ns.s[:ns.n] {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	if ns.n < len(ns.s) && s != "" {
		ns.s[ns.n] = s
		ns.n++
	}
	return s
}

// DecodeNames is Decode sharing repeated names through names.
func DecodeNames(b []byte, names *Names) (Message, error) {
	d := decoder{b: b, names: names}
	var m Message
	v := d.byte("version")
	if d.err == nil && (v == 0 || v > FormatVersion) {
		if v > FormatVersion {
			return Message{}, &DecodeError{Offset: 0, Err: ErrUnsupportedVersion, What: "version"}
		}
		d.fail(ErrMalformed, "version")
	}
	m.Type = MsgType(d.byte("type"))
	if d.err == nil && !m.Type.known() {
		d.fail(ErrMalformed, "type")
	}
	// Each type allows some flags; one message, one encoding: its type and
	// flags fix its version.
	sync := m.Type.isSync()
	allowed := byte(flagCounted)
	switch {
	case sync && m.Type.isSyncRequest():
		allowed |= flagDone | flagPartial | flagReads
	case sync:
		allowed |= flagDone | flagRecover | flagCycle
	case m.Type == MsgRefuse:
		allowed |= flagFloor | flagGone | flagReads
	case m.Type == MsgFenced:
		allowed |= flagCycle
	case m.Type == MsgFence, m.Type == MsgPrepare:
		allowed |= flagReads | flagGone
	}
	flags := d.byte("flags")
	// A refusal lists members only when it names a floor (its copiers).
	if m.Type == MsgRefuse && flags&flagFloor == 0 {
		allowed &^= flagReads
	}
	// Gone needs version 8 (which checks below that it has Gone or a
	// floor's copiers).
	if d.err == nil && (flags&^allowed != 0 || (flags&flagGone != 0 && v != 8)) {
		d.fail(ErrMalformed, "flags")
	}
	m.Counted = flags&flagCounted != 0
	m.Done = flags&flagDone != 0
	m.Floor = flags&flagFloor != 0
	m.Partial = flags&flagPartial != 0
	m.Recovering = flags&flagRecover != 0
	m.Cycle = flags&flagCycle != 0
	// A prepare's version depends on its epoch, and the flag of Reads
	// stands for the list, both read below.
	reads := flags&flagReads != 0
	probe := m
	if reads {
		probe.Reads = []ring.NodeID{{}}
	}
	if flags&flagGone != 0 {
		probe.Gone = []ring.NodeID{{}}
	}
	// Version 6 takes the layout of the version before it: which one the
	// type and flags say. Whether a message needs version 6 shows only
	// once it is read (its records), and is checked then.
	lv := v
	if v >= 6 {
		lv = layoutOf(probe)
	}
	sincePrepare := m.Type == MsgPrepare && v == 4
	if d.err == nil && v < 6 && v != layoutOf(probe) && !sincePrepare {
		d.off -= 2
		d.fail(ErrMalformed, "type or flags of another version")
	}
	m.From = d.node("from")
	m.To = d.node("to")
	m.Key.Type = d.name("key type")
	m.Key.ID = d.string("key id")
	m.Epoch = d.epoch("epoch")
	m.Promised = d.epoch("promised")
	if d.err == nil && m.Type == MsgPrepare && v < 6 && sincePrepare == m.Promised.IsZero() {
		d.fail(ErrMalformed, "prepare's epoch in another version")
	}
	m.Version = d.uvarint("version")
	m.Round = d.uvarint("round")
	if m.Type == MsgAcceptDelta {
		if e := d.bytes("delta"); e != nil {
			m.Delta = append([]byte(nil), e...)
		}
	}
	if sync || lv >= 4 {
		m.Range.Start = ring.Token(d.uvarint("range start"))
		m.Range.End = ring.Token(d.uvarint("range end"))
		m.Cursor = ring.Token(d.uvarint("cursor"))
		m.Limit = d.uvarint("limit")
	}
	if reads {
		m.Reads = d.nodes("read")
	}
	if flags&flagGone != 0 {
		m.Gone = d.nodes("gone")
	}
	n := d.uvarint("record count")
	if d.err == nil && (n > uint64(len(d.b)-d.off)/minRecordLen || (n > 0 && !sync && lv >= 4)) {
		d.fail(ErrMalformed, "record count")
	}
	if d.err == nil && n > 0 && m.Type == MsgSyncIndexRequest {
		d.fail(ErrMalformed, "records in an index request")
	}
	if d.err == nil && n > maxPresize {
		start := d.off
		for range n {
			if sync {
				d.bytes("record key type")
				d.bytes("record key id")
			}
			d.skipRecord(sync || m.Type == MsgAccept)
		}
		d.off = start
	}
	if d.err == nil && n > 0 {
		m.Records = make([]Record, 0, n)
		for range n {
			k := m.Key
			if sync {
				k.Type = d.name("record key type")
				k.ID = d.string("record key id")
			}
			start := d.off
			r := d.record(k, sync || m.Type == MsgAccept, m.Type == MsgAccept)
			if d.err != nil {
				break
			}
			if m.Type == MsgSyncIndex && r.Value != nil && !r.Tombstone && r.Kind != KindPromise {
				d.off = start
				d.fail(ErrMalformed, "index record with a value")
				break
			}

			m.Records = append(m.Records, r)
		}
	}
	if d.err == nil && m.Type == MsgAcceptDelta && (len(m.Records) != 1 || m.Records[0].Tombstone || m.Records[0].Value != nil) {
		// The edit stands for the value: one record, without its own.
		d.fail(ErrMalformed, "accept-delta record")
	}
	if d.err == nil && m.Type == MsgAcceptNack && len(m.Records) != 0 {
		d.fail(ErrMalformed, "accept-nack record")
	}
	if d.err == nil && (m.Type == MsgForget || m.Type == MsgForgotten) && len(m.Records) != 0 {
		d.fail(ErrMalformed, "forget records")
	}
	if d.err == nil && (v >= 6 || versionOf(m) >= 6) && versionOf(m) != v {
		d.off = 0
		d.fail(ErrMalformed, "content of another version")
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail(ErrMalformed, "trailing bytes")
	}
	if d.err != nil {
		return Message{}, d.err
	}
	return m, nil
}

type decoder struct {
	b     []byte
	off   int
	err   error
	names *Names
}

func (d *decoder) fail(err error, what string) {
	if d.err == nil {
		d.err = &DecodeError{Offset: d.off, Err: err, What: what}
	}
}

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(ErrTruncated, what)
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		d.fail(ErrTruncated, what)
		return 0
	case n < 0 || (n > 1 && d.b[d.off+n-1] == 0):
		// An overlong encoding would give one message two encodings.
		d.fail(ErrMalformed, what)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail(ErrTruncated, what)
		return nil
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) string(what string) string { return string(d.bytes(what)) }

// name is string for a string messages repeat (see Names).
func (d *decoder) name(what string) string { return d.names.intern(d.bytes(what)) }

// nodes reads a uvarint count (at least 1), then the nodes.
func (d *decoder) nodes(what string) []ring.NodeID {
	if d.err != nil {
		return nil
	}
	// Each node takes two bytes at least: the count is checked against
	// the bytes left before anything is allocated.
	n := d.uvarint(what + " count")
	if d.err == nil && (n == 0 || n > uint64(len(d.b)-d.off)/2) {
		d.fail(ErrMalformed, what+" count")
	}
	if d.err == nil && n > maxPresize {
		start := d.off
		for i := uint64(0); d.err == nil && i < n; i++ {
			d.bytes(what)
			d.uvarint(what)
		}
		d.off = start
	}
	if d.err != nil {
		return nil
	}
	out := make([]ring.NodeID, 0, n)
	for i := uint64(0); d.err == nil && i < n; i++ {
		out = append(out, d.node(what))
	}
	return out
}

func (d *decoder) node(what string) ring.NodeID {
	addr := d.name(what)
	inc := d.uvarint(what)
	return ring.NodeID{Addr: addr, Incarnation: inc}
}

func (d *decoder) epoch(what string) Epoch {
	term := d.uvarint(what)
	return Epoch{Term: term, Node: d.node(what)}
}

// skipRecord parses a record as record does, allocating nothing.
func (d *decoder) skipRecord(promiseOK bool) {
	kind := Kind(d.byte("record kind"))
	if d.err == nil && ((kind == KindPromise && !promiseOK) || kind > maxKind) {
		d.fail(ErrMalformed, "record kind")
	}
	flags := d.byte("record flags")
	if d.err == nil && flags&^flagTombstone != 0 {
		d.fail(ErrMalformed, "record flags")
	}
	d.bytes("record name")
	d.uvarint("record epoch")
	d.bytes("record epoch")
	d.uvarint("record epoch")
	d.uvarint("record version")
	d.bytes("record value")
}

// record parses one record of key k; promiseOK allows a promise (a
// catch-up chunk carries them; an accept, an owner's horizon), which has
// nothing but its epoch and, optionally, a horizon as its value; an
// accept's must have a horizon, and may have a version.
func (d *decoder) record(k Key, promiseOK, accept bool) Record {
	r := Record{Key: k}
	start := d.off
	r.Kind = Kind(d.byte("record kind"))
	if d.err == nil && ((r.Kind == KindPromise && !promiseOK) || r.Kind > maxKind) {
		d.fail(ErrMalformed, "record kind")
	}
	defer func() {
		if d.err != nil || r.Kind != KindPromise {
			return
		}
		_, horizon := HorizonOf(r)
		if r.Tombstone || r.Name != "" || (r.Version != 0 && !accept) || (r.Value != nil && !horizon) || (accept && !horizon) {
			d.off = start
			d.fail(ErrMalformed, "promise record")
		}
	}()
	flags := d.byte("record flags")
	if d.err == nil && flags&^flagTombstone != 0 {
		d.fail(ErrMalformed, "record flags")
	}
	r.Tombstone = flags&flagTombstone != 0
	r.Name = d.string("record name")
	r.Epoch = d.epoch("record epoch")
	r.Version = d.uvarint("record version")
	if v := d.bytes("record value"); len(v) > 0 {
		r.Value = append([]byte(nil), v...)
	}
	return r
}
