package replica

import (
	"cmp"

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
	// KindPromise is a replica's promise for a key: only Epoch is
	// meaningful, the highest ownership epoch it has promised.
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
// KindPromise only Key, Kind and Epoch are set.
type Record struct {
	Key       Key
	Kind      Kind
	Name      string
	Epoch     Epoch
	Version   uint64
	Tombstone bool
	Value     []byte
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
