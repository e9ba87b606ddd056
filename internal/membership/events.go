package membership

import (
	"time"

	"github.com/troupe-go/troupe/ring"
)

// EventKind tells what an Event reports.
type EventKind uint8

// Event kinds.
const (
	// EventMemberUpdated: a member was first seen or its status changed.
	// Member is the new record; Prev the previous status (meaningless when
	// New is set).
	EventMemberUpdated EventKind = iota + 1
	// EventMemberForgotten: a tombstone outlived TombstoneTTL and was
	// dropped from the table.
	EventMemberForgotten
	// EventStanding: this node started or stopped owning non-pinned actors
	// (see Owning).
	EventStanding
	// EventLocalHealth: this node started or stopped doubting itself
	// because it hears nobody or its own ticks run late (see Healthy).
	EventLocalHealth
	// EventRefuted: this node raised its membership incarnation to refute a
	// suspicion or death verdict about itself. Member is the new record.
	EventRefuted
	// EventRemoved: this process was marked left (orderly leave completed,
	// removed by a majority, or replaced by a newer process at its
	// address). It must stop; a restart needs a new process incarnation.
	EventRemoved
	// EventJoined: the node learned the table from a seed or another
	// member (a node without seeds is joined from the start and reports
	// nothing).
	EventJoined
)

func (k EventKind) String() string {
	switch k {
	case EventMemberUpdated:
		return "member-updated"
	case EventMemberForgotten:
		return "member-forgotten"
	case EventStanding:
		return "standing"
	case EventLocalHealth:
		return "local-health"
	case EventRefuted:
		return "refuted"
	case EventRemoved:
		return "removed"
	case EventJoined:
		return "joined"
	}
	return "event(?)"
}

// Event is one observable change, in the order the core made it.
type Event struct {
	Kind EventKind
	// At is the core's time when the change happened.
	At time.Time
	// Member is the record concerned (EventMemberUpdated,
	// EventMemberForgotten, EventRefuted, EventRemoved).
	Member Member
	// Prev is the status before an EventMemberUpdated.
	Prev Status
	// New is set on the EventMemberUpdated that first reports a NodeID.
	New bool
	// Owning is the new standing for EventStanding.
	Owning bool
	// Healthy is the new local health for EventLocalHealth.
	Healthy bool
}

// Envelope is one message the runtime must send: to the advertised
// address To.
type Envelope struct {
	To  string
	Msg Message
}

// Ready lists, field by field, what the runtime must do after calls into
// the Core: send every message in Messages (in order, best effort; loss is
// tolerated), deliver Events to observers, and, when MemberSet is non-nil,
// hand the new target member set to placement.
type Ready struct {
	Messages []Envelope
	Events   []Event
	// MemberSet is the new target member set, sorted by NodeID, when it
	// changed since the previous Ready; nil otherwise. Placement moves
	// towards it one member at a time with PlanChanges.
	MemberSet []ring.NodeID
	// Changed lists every record whose value changed since the previous
	// Ready (incarnation, status, actor types or accusers), in the order
	// of the changes, the latest value of each record once. Forgotten
	// records appear in Events only.
	Changed []Member
}

// IsEmpty reports whether there is nothing to do.
func (r Ready) IsEmpty() bool {
	return len(r.Messages) == 0 && len(r.Events) == 0 && r.MemberSet == nil && len(r.Changed) == 0
}
