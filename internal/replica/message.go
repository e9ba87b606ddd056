package replica

import "github.com/troupe-go/troupe/ring"

// MsgType says what a Message asks or answers.
type MsgType uint8

const (
	// MsgPrepare (owner → replica) asks the replica to promise Epoch for
	// Key and to send back what it holds. An owner acquiring again above
	// a floor names in Promised the epoch of its first acquisition: the
	// replica refuses if it promised another node's epoch newer than that.
	MsgPrepare MsgType = iota + 1
	// MsgPromise (replica → owner) promises Epoch and carries every record
	// the replica holds for Key.
	MsgPromise
	// MsgAccept (owner → replica) carries one record written at Epoch.
	MsgAccept
	// MsgAccepted (replica → owner) says the replica stored the record of
	// Version at Epoch, or a newer one of that epoch.
	MsgAccepted
	// MsgCheck (owner → replica) is the read barrier: is Epoch still the
	// newest the replica promised for Key? Round names the owner's batch.
	MsgCheck
	// MsgChecked (replica → owner) answers a check of Round positively.
	MsgChecked
	// MsgRefuse (replica → owner) refuses a message of Epoch because the
	// replica promised Promised, a newer epoch: the owner steps down.
	MsgRefuse
	// MsgSyncRequest (catching-up replica → source) asks for the records
	// of Range whose tokens lie after Cursor, at most Limit bytes of them;
	// Round names the request. With Records it fetches only the records
	// of their slots (each names its Key, Kind and Name, nothing else):
	// the values a MsgSyncIndex listed. A source that sends more than
	// those (all of the span) is still answered correctly.
	MsgSyncRequest
	// MsgSyncChunk (source → catching-up replica) answers the request of
	// Round with Records (each with its own Key; promises included) in
	// ring order, the Cursor to resume after, and Done once the range
	// is exhausted.
	MsgSyncChunk
	// MsgFence (hand-off copier → source) raises the floor of Range to
	// Epoch.Term at the source before the copier reads the range from it
	// (see Floor); Round names the copier's fencing.
	MsgFence
	// MsgFenced (source → copier) answers a fence: Promised.Term is the
	// highest term the source promised, or held a record of, for a key of
	// the range, or of another copier's floor over it, before it raised
	// the floor; Epoch.Term is the fence's
	// term; Counted is false when the source itself still receives part
	// of the range (it then raised nothing).
	MsgFenced
)

const (
	// MsgSyncIndexRequest (catching-up replica → source) is MsgSyncRequest
	// answered with a MsgSyncIndex: the records without their values.
	MsgSyncIndexRequest MsgType = 12
	// MsgSyncIndex (source → catching-up replica) is MsgSyncChunk whose
	// state and continuity records have no value (Value nil): the
	// replica fetches the values it lacks with a MsgSyncRequest naming
	// their slots. Promises and tombstones are whole.
	MsgSyncIndex MsgType = 13
	// MsgAcceptDelta (owner → replica) carries one record written at
	// Epoch as an edit (Delta) of the record of version Version at Epoch
	// in the same slot, which the replica acknowledged: Records holds the
	// record without its value.
	MsgAcceptDelta MsgType = 14
	// MsgAcceptNack (replica → owner) says that the replica does not hold
	// the base of the delta accept of Version at Epoch (or could not
	// apply its edit), so the owner sends that record whole.
	MsgAcceptNack MsgType = 15
	// MsgForget (owner → replica) collects a key: every replica of the
	// set stored the key's tombstones, its only records, up to Version at
	// Epoch, so the replica raises the key's horizon to them (see
	// Horizon), which erases them.
	MsgForget MsgType = 16
	// MsgForgotten (replica → owner) answers the MsgForget of Version.
	MsgForgotten MsgType = 17
	maxMsgType           = MsgForgotten
)

var msgTypeNames = [...]string{
	MsgPrepare: "prepare", MsgPromise: "promise", MsgAccept: "accept", MsgAccepted: "accepted",
	MsgCheck: "check", MsgChecked: "checked", MsgRefuse: "refuse",
	MsgSyncRequest: "sync-request", MsgSyncChunk: "sync-chunk",
	MsgSyncIndexRequest: "sync-index-request", MsgSyncIndex: "sync-index",
	MsgFence: "fence", MsgFenced: "fenced",
	MsgAcceptDelta: "accept-delta", MsgAcceptNack: "accept-nack",
	MsgForget: "forget", MsgForgotten: "forgotten",
}

// known reports whether t is a message type of this format.
func (t MsgType) known() bool { return t != 0 && t <= maxMsgType && msgTypeNames[t] != "" }

func (t MsgType) String() string {
	if !t.known() {
		return "unknown"
	}
	return msgTypeNames[t]
}

// Message is one protocol message. Which fields matter depends on Type:
// Records for promise (all the replica holds) and accept (exactly one);
// Version for accepted and accept-nack, and the base version for
// accept-delta; Round for check and checked; Promised and Floor for
// refuse; Promised, when set, for prepare; Delta, the edit, for accept-delta.
// A promise's Promised and Version are the replica's horizon for the key
// (zero when it has none); an accept whose record is of KindPromise carries an owner's
// horizon (in its Value) rather than a record.
// Counted is set by a replica that may count toward a quorum (it is not
// still receiving its range). Range, Cursor, Limit and Done belong to the
// catch-up messages: MsgSyncRequest, MsgSyncChunk, MsgSyncIndexRequest
// and MsgSyncIndex; Range, Round, and the terms of Epoch and Promised to
// MsgFence and MsgFenced.
type Message struct {
	Type     MsgType
	From, To ring.NodeID
	Key      Key
	Epoch    Epoch
	Promised Epoch
	Version  uint64
	Round    uint64
	Counted  bool
	// Floor is set on a refusal whose Promised is a floor (see Floor):
	// its Node is the copier that fenced the key's range, not an owner.
	Floor   bool
	Records []Record
	Delta   []byte

	Range  ring.Range
	Cursor ring.Token
	Limit  uint64
	Done   bool
	// Partial, on a catch-up request, asks a source still receiving part
	// of the range to send what it holds anyway (its answer is not
	// Counted): for a catch-up that reads every member, which needs none
	// of them caught up (see replicanode.Node.CatchUpFromAll).
	Partial bool
	// Recovering, on a catch-up answer, says that the source receives
	// the whole ring (it stopped uncleanly, or joined with an empty
	// store): nothing it holds is known to be all it acknowledged.
	Recovering bool
	// Cycle, on a catch-up answer or a fenced, says that the source still
	// receives part of the range but waits for it on the requester alone
	// (its other previous replicas are gone): what it holds is all it
	// will ever give the requester, so the requester need not wait for
	// it, which would wait on the requester in turn. The driver sets it on
	// a fence it receives, for the core to fence such a range (it never
	// crosses the wire on a fence).
	Cycle bool
	// Reads, on a catch-up request or a fence, lists every source the
	// requester's copy reads, when it needs them all: a source that
	// waits for the range only on the requester and on those answers too
	// (Cycle), since the requester reads whatever it would have given.
	// On a prepare it lists the members whose floors the prepare passes:
	// the owner's sets and the copiers its caller named
	// (AcquireOptions.Copiers). On a refusal naming a floor, the floor's
	// earlier copiers (see Floor.Copiers).
	Reads []ring.NodeID
	// Gone, on a fence, lists the members whose departure from the ring
	// gave the range to the copier (see Floor.Departed); on a refusal
	// naming a floor, the floor's departures; on a prepare, the members
	// the owner's caller saw depart (AcquireOptions.Gone) and those the
	// owner found gone from its set.
	Gone []ring.NodeID
}

// isSync reports whether t is a catch-up message type, which needs format
// version 2 or 3.
func (t MsgType) isSync() bool {
	return t == MsgSyncRequest || t == MsgSyncChunk || t == MsgSyncIndexRequest || t == MsgSyncIndex
}

// isSyncRequest reports whether t asks a catch-up source for records.
func (t MsgType) isSyncRequest() bool { return t == MsgSyncRequest || t == MsgSyncIndexRequest }

// isSyncAnswer reports whether t is a catch-up source's answer.
func (t MsgType) isSyncAnswer() bool { return t == MsgSyncChunk || t == MsgSyncIndex }

// isDelta reports whether t is a message of the delta accept path, which
// needs format version 3.
func (t MsgType) isDelta() bool { return t == MsgAcceptDelta || t == MsgAcceptNack }

// isFence reports whether t is a fence message type, which needs format
// version 4.
func (t MsgType) isFence() bool { return t == MsgFence || t == MsgFenced }
