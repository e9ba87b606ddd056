package noderecord

import "fmt"

// Decision is what the ordering rule makes of an update.
type Decision uint8

// The decisions. Inserted, Restarted and Advanced are accepted: the
// update replaces the stored record and renews its lease. Duplicate and
// Stale are ignored: nothing changes, not even the lease, and the caller
// is told so without an error, so that a retried or delayed heartbeat is
// harmless.
const (
	// Inserted: no record existed.
	Inserted Decision = iota + 1
	// Restarted: the stored record is of another incarnation, so the
	// process restarted.
	Restarted
	// Advanced: same incarnation, greater sequence.
	Advanced
	// Duplicate: same incarnation and sequence; ignored whatever the
	// rest of the record says.
	Duplicate
	// Stale: same incarnation, smaller sequence; ignored.
	Stale
)

func (d Decision) String() string {
	switch d {
	case Inserted:
		return "inserted"
	case Restarted:
		return "restarted"
	case Advanced:
		return "advanced"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	}
	return fmt.Sprintf("decision(%d)", uint8(d))
}

// Accepted reports whether the update replaces the stored record.
func (d Decision) Accepted() bool { return d == Inserted || d == Restarted || d == Advanced }

// Decide applies the ordering rule to an update of the record stored
// under the same key (nil when none is). It looks at Incarnation and Seq
// only. A store applies it atomically with the write it allows.
//
// Incarnations are random, so they have no order: any other incarnation
// wins, including a delayed heartbeat of the process's previous life,
// which the new one's next heartbeat then replaces.
func Decide(stored *Record, update Record) Decision {
	switch {
	case stored == nil:
		return Inserted
	case stored.Incarnation != update.Incarnation:
		return Restarted
	case update.Seq > stored.Seq:
		return Advanced
	case update.Seq == stored.Seq:
		return Duplicate
	}
	return Stale
}
