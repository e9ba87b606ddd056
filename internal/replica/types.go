package replica

import (
	"cmp"
	"encoding/binary"

	"github.com/troupe-go/troupe/ring"
)

// Key names one actor: its type and its key. Records of every kind for one
// Key share its replica set and its ownership epoch.
type Key struct {
	Type string
	ID   string
}

// Token is the key's ring position, the one placement uses.
func (k Key) Token() ring.Token { return ring.KeyToken(k.Type, k.ID) }

// Kind says what a record holds. Kinds are explicit in every message and
// stored record so that records of another purpose ride on the same replica
// sets, epochs and stream; the core treats every kind other than
// KindPromise alike.
type Kind uint8

const (
	// KindPromise is a replica's promise for a key: Epoch is the highest
	// ownership epoch it has promised, and Value, when set, the key's
	// horizon (an encoded Epoch, see Horizon).
	KindPromise Kind = 0
	// KindState is an actor's state (its encoded value, or a tombstone).
	KindState Kind = 1
	// KindContinuity is a continuity record of a key (request ids,
	// attempts, retained responses), replicated with the key's state.
	KindContinuity Kind = 2
	// maxKind is the highest kind this format knows.
	maxKind = KindContinuity
)

// Epoch is an ownership epoch. Each activation of a key picks a Term above
// every term it has seen for the key; Node, the activating process, makes
// two owners' epochs distinct even at the same Term. Epochs order by Term,
// then Node.
type Epoch struct {
	Term uint64
	Node ring.NodeID
}

// Compare returns -1, 0 or +1 as e is older than, equal to or newer than o.
func (e Epoch) Compare(o Epoch) int {
	if c := cmp.Compare(e.Term, o.Term); c != 0 {
		return c
	}
	return e.Node.Compare(o.Node)
}

// IsZero reports whether e is the epoch before any promise.
func (e Epoch) IsZero() bool { return e.Term == 0 && e.Node.IsZero() }

// Slot is a record's place among its key's records: its kind, and a name
// that tells records of one kind apart (a continuity record's request id;
// empty for the state).
type Slot struct {
	Kind Kind
	Name string
}

// Record is one stored record of a key: the epoch of the owner that wrote
// it, the version that owner gave it, and its value or a tombstone. For
// KindPromise only Key, Kind, Epoch and (for a horizon) Value are set.
type Record struct {
	Key       Key
	Kind      Kind
	Name      string
	Epoch     Epoch
	Version   uint64
	Tombstone bool
	Value     []byte
	// erase makes a record in Ready.Persist erase its slot (see
	// Erases).
	erase bool
}

// Erases reports whether r, met in Ready.Persist, asks the driver to
// erase the record stored in its slot rather than to store r: a
// collected tombstone, or a record below its key's horizon. It is
// ordered with the other records persisted.
func (r Record) Erases() bool { return r.erase }

// Erasing returns the record that, persisted, erases r's slot.
func Erasing(r Record) Record {
	return Record{Key: r.Key, Kind: r.Kind, Name: r.Name, Epoch: r.Epoch, Version: r.Version, erase: true}
}

// Slot returns r's place among its key's records.
func (r Record) Slot() Slot { return Slot{Kind: r.Kind, Name: r.Name} }

// newer reports whether r was written after o: a newer epoch wins, then a
// higher version within one epoch.
func (r Record) newer(o Record) bool {
	if c := r.Epoch.Compare(o.Epoch); c != 0 {
		return c > 0
	}
	return r.Version > o.Version
}

// Horizon marks a key whose records were collected: when its owner of
// Epoch raised it, every record the key held on every replica of its set
// was a tombstone at or before Version. Every record of the key written at
// or before it (by Epoch, then Version) is void: a tombstone collected, or
// an older record one replaced. A promise record carries its key's
// horizon, if it has one (docs/replication.md, "Collecting tombstones").
type Horizon struct {
	Epoch   Epoch
	Version uint64
}

// IsZero reports whether h is no horizon.
func (h Horizon) IsZero() bool { return h.Epoch.IsZero() && h.Version == 0 }

// Covers reports whether r is void under h: written at or before it.
func (h Horizon) Covers(r Record) bool {
	c := r.Epoch.Compare(h.Epoch)
	return c < 0 || (c == 0 && r.Version <= h.Version)
}

// After reports whether h is newer than o.
func (h Horizon) After(o Horizon) bool {
	if c := h.Epoch.Compare(o.Epoch); c != 0 {
		return c > 0
	}
	return h.Version > o.Version
}

// HorizonOf returns the horizon a promise record carries; ok is false
// for a record without one, or that is not a promise.
func HorizonOf(r Record) (h Horizon, ok bool) {
	if r.Kind != KindPromise || len(r.Value) == 0 {
		return Horizon{}, false
	}
	return decodeHorizon(r.Value)
}

// PromiseRecord returns the promise record of k for epoch promised and
// horizon h (none when zero).
func PromiseRecord(k Key, promised Epoch, h Horizon) Record {
	r := Record{Key: k, Kind: KindPromise, Epoch: promised}
	if !h.IsZero() {
		r.Value = binary.AppendUvarint(appendEpoch(nil, h.Epoch), h.Version)
	}
	return r
}

func decodeHorizon(b []byte) (Horizon, bool) {
	d := decoder{b: b, names: &Names{}}
	h := Horizon{Epoch: d.epoch("horizon")}
	h.Version = d.uvarint("horizon version")
	if d.err != nil || d.off != len(b) || h.IsZero() {
		return Horizon{}, false
	}
	return h, true
}
