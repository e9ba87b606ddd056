package replicastore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// The on-disk format, version 7.
//
// The format record, under key "\x00format", is the format version as a
// big-endian uint32 followed by a CRC-32C of those four bytes.
//
// A record lives under 'r', the key's ring token (8 bytes, big-endian, so
// a token range is a key range), the key's type and id (each a uvarint
// length then the bytes), the kind byte and the record's name (a uvarint
// length then the bytes). Its value is a CRC-32C (4 bytes, big-endian) of
// the record's key followed by what follows the CRC, so a damaged key is
// caught as a damaged value is; then a flags byte (bit 0: tombstone), the
// epoch (uvarint term, node address as uvarint length and bytes, uvarint
// incarnation), the uvarint version and the value bytes to the end.
//
// The clean-stop marker, under key "\x00clean", says the store lost
// nothing it acknowledged since it was last opened: written at Close
// after a sync, kept by an Open with Sync, removed at an Open without
// Sync; its value is informational.
//
// The boot record, under key "\x00boot", is the id of the machine's boot
// (Linux's boot_id) on which the store was last opened without Sync,
// written by that Open; an Open with Sync, or where the boot is unknown,
// removes it. With no marker, it says whether the run that stopped
// without Close did so on the running boot: a process killed loses
// nothing the kernel holds, a restart of the machine may. A binary that
// does not know it sees no marker and takes the stop for a loss, so it
// needs no new format version.
//
// The receiving record, under key "\x00receiving", lists the ring ranges
// the replica is still receiving: a CRC-32C (4 bytes, big-endian) of the
// key and what follows, a uvarint count, then each range's Start and End
// (8 bytes each, big-endian). An Open that finds neither marker nor boot
// record of the running boot in a store that was opened before writes
// the whole ring into it, so a loss stays
// known, across clean stops too, until the driver records that it caught
// up. No record means the replica never recorded any.
//
// The floors record, under key "\x00floors", lists the replica's floors
// (range-level promises, see replica.Floor): a CRC-32C (4 bytes,
// big-endian) of the key and what follows, a uvarint count, then each
// floor's range Start and End (8 bytes each, big-endian) and its epoch
// (uvarint term, the copier's address as a uvarint length and bytes, its
// uvarint incarnation); from version 7, each floor then lists its earlier
// copiers and its departures (replica.Floor.Copiers, Departed), each list
// a uvarint count, then each node as an address (uvarint length and
// bytes) and a uvarint incarnation. No record means no floors.
//
// Version 5 added the floors record. A version 4 store is read as it is
// (it has no floors) and becomes version 5 in the transaction that first
// records floors, so a binary that reads only version 4, and would ignore
// the floors, refuses a store that has them (replication.ErrNewerFormat).
//
// Version 6 lets a promise record carry a value: the key's horizon
// (replica.Horizon), an epoch encoded as above (uvarint term, node address
// as uvarint length and bytes, uvarint incarnation). A version 5 (or 4)
// store is read as it is and becomes version 6 in the transaction that
// first stores a horizon, so a binary that would ignore it refuses the
// store. Records erased (collected tombstones, records below a horizon)
// are deleted from the store.
//
// Version 7 lets floors name earlier copiers and departures. A version 6
// (or older) store is read as it is and becomes version 7 in the
// transaction that first records a floor that names one, its floors record written in version
// 7's layout from then on, so a binary that would misread it refuses the
// store.
//
// Versions 1 to 3 were never released: a store of one of them is refused
// (replication.ErrOlderFormat), not upgraded, and left as it is.

// formatVersion is the newest on-disk format this binary writes and reads.
const formatVersion uint32 = 7

// oldestFormat is the oldest on-disk format this binary reads.
const oldestFormat uint32 = 4

// floorsFormat is the first format with the floors record.
const floorsFormat uint32 = 5

// horizonFormat is the first format with horizons in promise records.
const horizonFormat uint32 = 6

// departedFormat is the first format whose floors name earlier copiers
// and departures.
const departedFormat uint32 = 7

var formatKey = []byte("\x00format")

// cleanKey is the clean-stop marker: present while no acknowledged write
// can have been lost to a power loss (written at Close, and kept by a
// store opened with Sync), removed at an Open without Sync.
var cleanKey = []byte("\x00clean")

// bootKey holds the boot record: the id of the boot of the last Open
// without Sync.
var bootKey = []byte("\x00boot")

// receivingKey holds the ranges the replica is still receiving.
var receivingKey = []byte("\x00receiving")

// floorsKey holds the replica's floors.
var floorsKey = []byte("\x00floors")

const recordPrefix = 'r'

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeFormat(v uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, v)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeFormat(b []byte) (uint32, error) {
	if len(b) != 8 || binary.BigEndian.Uint32(b[4:]) != crc32.Checksum(b[:4], castagnoli) {
		return 0, fmt.Errorf("%w: format record %x", replication.ErrCorrupt, b)
	}
	return binary.BigEndian.Uint32(b), nil
}

func appendKey(b []byte, k replica.Key, slot replica.Slot) []byte {
	b = append(b, recordPrefix)
	b = binary.BigEndian.AppendUint64(b, uint64(k.Token()))
	b = binary.AppendUvarint(b, uint64(len(k.Type)))
	b = append(b, k.Type...)
	b = binary.AppendUvarint(b, uint64(len(k.ID)))
	b = append(b, k.ID...)
	b = append(b, byte(slot.Kind))
	b = binary.AppendUvarint(b, uint64(len(slot.Name)))
	return append(b, slot.Name...)
}

func tokenKey(t ring.Token) []byte {
	return binary.BigEndian.AppendUint64([]byte{recordPrefix}, uint64(t))
}

func decodeKey(b []byte) (replica.Key, replica.Slot, error) {
	bad := func() (replica.Key, replica.Slot, error) {
		return replica.Key{}, replica.Slot{}, fmt.Errorf("%w: record key %x", replication.ErrCorrupt, b)
	}
	if len(b) < 10 || b[0] != recordPrefix {
		return bad()
	}
	r := b[9:]
	str := func() (string, bool) {
		n, w := binary.Uvarint(r)
		if w <= 0 || n > uint64(len(r)-w) {
			return "", false
		}
		s := string(r[w : w+int(n)])
		r = r[w+int(n):]
		return s, true
	}
	var k replica.Key
	var slot replica.Slot
	var ok bool
	if k.Type, ok = str(); !ok {
		return bad()
	}
	if k.ID, ok = str(); !ok || len(r) < 1 {
		return bad()
	}
	slot.Kind = replica.Kind(r[0])
	if slot.Kind > replica.KindContinuity {
		return bad()
	}
	r = r[1:]
	if slot.Name, ok = str(); !ok || len(r) != 0 || binary.BigEndian.Uint64(b[1:9]) != uint64(k.Token()) {
		return bad()
	}
	return k, slot, nil
}

// encodeValue encodes r, stored under key (appendKey's encoding).
func encodeValue(key []byte, r replica.Record) []byte {
	b := make([]byte, 4, 24+len(r.Epoch.Node.Addr)+len(r.Value))
	var flags byte
	if r.Tombstone {
		flags = 1
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, r.Epoch.Term)
	b = binary.AppendUvarint(b, uint64(len(r.Epoch.Node.Addr)))
	b = append(b, r.Epoch.Node.Addr...)
	b = binary.AppendUvarint(b, r.Epoch.Node.Incarnation)
	b = binary.AppendUvarint(b, r.Version)
	b = append(b, r.Value...)
	binary.BigEndian.PutUint32(b, checksum(key, b[4:]))
	return b
}

// checksum is the CRC-32C of a record's key and its value after the CRC.
func checksum(key, rest []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, rest)
}

// decodeValue decodes the value b stored under key, which decodes as k
// and slot.
func decodeValue(key []byte, k replica.Key, slot replica.Slot, b []byte) (replica.Record, error) {
	return decodeStored(key, k, slot, b, true)
}

// decodeHead is decodeValue without the record's value, unless it is a
// promise's (see Store.Held); the checksum is checked all the same.
func decodeHead(key []byte, k replica.Key, slot replica.Slot, b []byte) (replica.Record, error) {
	return decodeStored(key, k, slot, b, slot.Kind == replica.KindPromise)
}

func decodeStored(key []byte, k replica.Key, slot replica.Slot, b []byte, value bool) (replica.Record, error) {
	bad := func(what string) (replica.Record, error) {
		return replica.Record{}, fmt.Errorf("%w: %s of %s/%s kind %d %q", replication.ErrCorrupt, what, k.Type, k.ID, slot.Kind, slot.Name)
	}
	if len(b) < 5 {
		return bad("short value")
	}
	if binary.BigEndian.Uint32(b) != checksum(key, b[4:]) {
		return bad("checksum mismatch")
	}
	r := replica.Record{Key: k, Kind: slot.Kind, Name: slot.Name, Tombstone: b[4]&1 != 0}
	if b[4]&^1 != 0 {
		return bad("unknown flags")
	}
	rest := b[5:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, false
		}
		rest = rest[n:]
		return v, true
	}
	var ok bool
	if r.Epoch.Term, ok = next(); !ok {
		return bad("epoch")
	}
	n, ok := next()
	if !ok || n > uint64(len(rest)) {
		return bad("epoch node")
	}
	r.Epoch.Node.Addr = string(rest[:n])
	rest = rest[n:]
	if r.Epoch.Node.Incarnation, ok = next(); !ok {
		return bad("epoch incarnation")
	}
	if r.Version, ok = next(); !ok {
		return bad("version")
	}
	if len(rest) > 0 && value {
		r.Value = append([]byte(nil), rest...)
	}
	return r, nil
}

func encodeReceiving(ranges []ring.Range) []byte {
	b := make([]byte, 4, 4+binary.MaxVarintLen64+16*len(ranges))
	b = binary.AppendUvarint(b, uint64(len(ranges)))
	for _, g := range ranges {
		b = binary.BigEndian.AppendUint64(b, uint64(g.Start))
		b = binary.BigEndian.AppendUint64(b, uint64(g.End))
	}
	binary.BigEndian.PutUint32(b, checksum(receivingKey, b[4:]))
	return b
}

func decodeReceiving(b []byte) ([]ring.Range, error) {
	bad := fmt.Errorf("%w: receiving record %x", replication.ErrCorrupt, b)
	if len(b) < 5 || binary.BigEndian.Uint32(b) != checksum(receivingKey, b[4:]) {
		return nil, bad
	}
	n, w := binary.Uvarint(b[4:])
	rest := b[4+max(w, 0):]
	if w <= 0 || n != uint64(len(rest))/16 || len(rest)%16 != 0 {
		return nil, bad
	}
	ranges := make([]ring.Range, 0, n)
	for ; len(rest) > 0; rest = rest[16:] {
		ranges = append(ranges, ring.Range{Start: ring.Token(binary.BigEndian.Uint64(rest)), End: ring.Token(binary.BigEndian.Uint64(rest[8:]))})
	}
	return ranges, nil
}

// minFloorLen is the length of the shortest encoded floor.
const minFloorLen = 19

// floorsLayout returns the format whose floors layout floors of a store of
// format v take, once written: version 7's when v is 7 or a floor names an
// earlier copier or a departure, else version 5's.
func floorsLayout(v uint32, floors []replica.Floor) uint32 {
	if v >= departedFormat || slices.ContainsFunc(floors, func(f replica.Floor) bool { return len(f.Copiers)+len(f.Departed) > 0 }) {
		return departedFormat
	}
	return floorsFormat
}

// encodeFloors encodes floors in the floors layout of format v.
func encodeFloors(floors []replica.Floor, v uint32) []byte {
	b := make([]byte, 4, 4+binary.MaxVarintLen64+(16+4*binary.MaxVarintLen64)*len(floors))
	b = binary.AppendUvarint(b, uint64(len(floors)))
	appendNode := func(n ring.NodeID) {
		b = binary.AppendUvarint(b, uint64(len(n.Addr)))
		b = append(b, n.Addr...)
		b = binary.AppendUvarint(b, n.Incarnation)
	}
	for _, f := range floors {
		b = binary.BigEndian.AppendUint64(b, uint64(f.Range.Start))
		b = binary.BigEndian.AppendUint64(b, uint64(f.Range.End))
		b = binary.AppendUvarint(b, f.Epoch.Term)
		appendNode(f.Epoch.Node)
		if v >= departedFormat {
			for _, ids := range [][]ring.NodeID{f.Copiers, f.Departed} {
				b = binary.AppendUvarint(b, uint64(len(ids)))
				for _, id := range ids {
					appendNode(id)
				}
			}
		}
	}
	binary.BigEndian.PutUint32(b, checksum(floorsKey, b[4:]))
	return b
}

// decodeFloors decodes a floors record of a store of format v.
func decodeFloors(b []byte, v uint32) ([]replica.Floor, error) {
	bad := fmt.Errorf("%w: floors record %x", replication.ErrCorrupt, b)
	if len(b) < 5 || binary.BigEndian.Uint32(b) != checksum(floorsKey, b[4:]) {
		return nil, bad
	}
	rest := b[4:]
	// uvarint takes one canonical uvarint off rest: an overlong one would
	// give one record two encodings.
	uvarint := func() (uint64, bool) {
		v, w := binary.Uvarint(rest)
		if w <= 0 || (w > 1 && rest[w-1] == 0) {
			return 0, false
		}
		rest = rest[w:]
		return v, true
	}
	n, ok := uvarint()
	if !ok || n > uint64(len(rest))/minFloorLen {
		return nil, bad
	}
	floors := make([]replica.Floor, 0, n)
	for range n {
		if len(rest) < minFloorLen {
			return nil, bad
		}
		var f replica.Floor
		f.Range = ring.Range{Start: ring.Token(binary.BigEndian.Uint64(rest)), End: ring.Token(binary.BigEndian.Uint64(rest[8:]))}
		rest = rest[16:]
		if f.Epoch.Term, ok = uvarint(); !ok {
			return nil, bad
		}
		l, ok := uvarint()
		if !ok || l > uint64(len(rest)) {
			return nil, bad
		}
		f.Epoch.Node.Addr = string(rest[:l])
		rest = rest[l:]
		if f.Epoch.Node.Incarnation, ok = uvarint(); !ok {
			return nil, bad
		}
		if v >= departedFormat {
			for _, ids := range []*[]ring.NodeID{&f.Copiers, &f.Departed} {
				// Each node takes two bytes at least.
				n, ok := uvarint()
				if !ok || n > uint64(len(rest))/2 {
					return nil, bad
				}
				for range n {
					l, ok := uvarint()
					if !ok || l > uint64(len(rest)) {
						return nil, bad
					}
					id := ring.NodeID{Addr: string(rest[:l])}
					rest = rest[l:]
					if id.Incarnation, ok = uvarint(); !ok {
						return nil, bad
					}
					*ids = append(*ids, id)
				}
			}
		}
		floors = append(floors, f)
	}
	if len(rest) != 0 {
		return nil, bad
	}
	return floors, nil
}
