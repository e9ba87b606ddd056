package membership

import (
	"bytes"
	"fmt"

	"github.com/troupe-go/troupe/ring"
	"github.com/vmihailenco/msgpack/v5"
)

// FormatVersion is the membership message format this binary writes. It
// only moves forward; a decoder refuses anything newer.
const FormatVersion = 1

// Decoder limits. A message breaking one is ErrMalformed.
const (
	// MaxMessageBytes bounds one encoded membership message.
	MaxMessageBytes = 8 << 20
	// MaxRecords bounds the records one message carries.
	MaxRecords = 1 << 16
	// MaxAddrLen bounds an address, like the node_id and address fields of
	// a node record.
	MaxAddrLen = 256
	// MaxActorTypes bounds the actor types one record lists.
	MaxActorTypes = 1024
	// MaxActorTypeLen bounds one actor type name.
	MaxActorTypeLen = 256
)

// MessageType tells what a membership message asks or answers.
type MessageType uint8

// Membership message types. See docs/membership.md for the exchange each
// one belongs to.
const (
	// MsgJoin: a joiner announces its own record to a seed address and
	// asks for the table.
	MsgJoin MessageType = iota + 1
	// MsgJoinReply: the seed's full table, answering MsgJoin.
	MsgJoinReply
	// MsgPing: a heartbeat to a neighbour or a probe of a non-neighbour;
	// carries piggybacked gossip. Always answered with MsgAck.
	MsgPing
	// MsgAck: the answer to a ping; carries piggybacked gossip.
	MsgAck
	// MsgGossip: records pushed eagerly to the neighbours as soon as they
	// are learned; not answered.
	MsgGossip
	// MsgSync: anti-entropy push, the sender's full table.
	MsgSync
	// MsgSyncReply: anti-entropy pull, the receiver's full table.
	MsgSyncReply
	// MsgNeighbour: asks the receiver to add the sender to its active view.
	// Priority is set when the sender has no active neighbour at all.
	MsgNeighbour
	// MsgNeighbourReply: Accept says whether the receiver added the sender.
	MsgNeighbourReply
	// MsgDisconnect: the sender removed the receiver from its active view.
	MsgDisconnect
	msgTypeEnd
)

func (t MessageType) String() string {
	names := [...]string{"", "join", "join-reply", "ping", "ack", "gossip", "sync", "sync-reply", "neighbour", "neighbour-reply", "disconnect"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("message(%d)", uint8(t))
}

// Message is one membership message. Which fields matter depends on Type.
type Message struct {
	Version uint8       `msgpack:"v"`
	Type    MessageType `msgpack:"type"`
	// From is the sender's identity.
	From ring.NodeID `msgpack:"from"`
	// To is the intended receiver's identity, zero when only its address
	// is known (a seed, or a member before its first reply). A process
	// drops messages addressed to another incarnation of itself.
	To ring.NodeID `msgpack:"to,omitempty"`
	// Records carries gossip (the sender's own record first for joins),
	// or the whole table for MsgJoinReply, MsgSync and MsgSyncReply.
	Records []Member `msgpack:"records,omitempty"`
	// Neighbour, on a ping, says the receiver is in the sender's active
	// view, so the receiver can keep its own view symmetric.
	Neighbour bool `msgpack:"nb,omitempty"`
	// Priority, on MsgNeighbour, asks the receiver to accept even when its
	// active view is full.
	Priority bool `msgpack:"prio,omitempty"`
	// Accept, on MsgNeighbourReply, tells whether the request was granted.
	Accept bool `msgpack:"accept,omitempty"`
}

// EncodeMessage encodes m with msgpack, using field names, at the current
// FormatVersion.
func EncodeMessage(m Message) ([]byte, error) {
	m.Version = FormatVersion
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.Encode(&m); err != nil {
		return nil, fmt.Errorf("troupe: encode membership message: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeMessage decodes and checks a membership message. It returns
// ErrUnsupportedVersion for a newer format and ErrMalformed for anything
// that breaks the format or its limits.
func DecodeMessage(b []byte) (Message, error) {
	if len(b) > MaxMessageBytes {
		return Message{}, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxMessageBytes)
	}
	if err := checkMsgpack(b); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var m Message
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if m.Version > FormatVersion {
		return Message{}, fmt.Errorf("%w: version %d, this binary reads up to %d", ErrUnsupportedVersion, m.Version, FormatVersion)
	}
	if m.Version == 0 {
		return Message{}, fmt.Errorf("%w: missing version", ErrMalformed)
	}
	if m.Type == 0 || m.Type >= msgTypeEnd {
		return Message{}, fmt.Errorf("%w: unknown type %d", ErrMalformed, m.Type)
	}
	if err := checkID(m.From); err != nil {
		return Message{}, fmt.Errorf("%w: from: %w", ErrMalformed, err)
	}
	if m.From.Addr == "" {
		return Message{}, fmt.Errorf("%w: from: empty address", ErrMalformed)
	}
	if err := checkID(m.To); err != nil {
		return Message{}, fmt.Errorf("%w: to: %w", ErrMalformed, err)
	}
	if len(m.Records) > MaxRecords {
		return Message{}, fmt.Errorf("%w: %d records exceeds %d", ErrMalformed, len(m.Records), MaxRecords)
	}
	for i := range m.Records {
		if err := checkMember(m.Records[i]); err != nil {
			return Message{}, fmt.Errorf("%w: record %d: %w", ErrMalformed, i, err)
		}
		normalize(&m.Records[i])
	}
	return m, nil
}

// EncodeMember encodes one record with msgpack field names.
func EncodeMember(m Member) ([]byte, error) {
	b, err := msgpack.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("troupe: encode member record: %w", err)
	}
	return b, nil
}

// DecodeMember decodes and checks one record, normalizing its lists.
func DecodeMember(b []byte) (Member, error) {
	if len(b) > MaxMessageBytes {
		return Member{}, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxMessageBytes)
	}
	if err := checkMsgpack(b); err != nil {
		return Member{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var m Member
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return Member{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := checkMember(m); err != nil {
		return Member{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	normalize(&m)
	return m, nil
}

func checkID(id ring.NodeID) error {
	if len(id.Addr) > MaxAddrLen {
		return fmt.Errorf("address of %d bytes exceeds %d", len(id.Addr), MaxAddrLen)
	}
	return nil
}

func checkMember(m Member) error {
	if err := checkID(m.ID); err != nil {
		return err
	}
	if m.ID.Addr == "" {
		return fmt.Errorf("empty address")
	}
	if !validStatus(m.Status) {
		return fmt.Errorf("unknown status %d", m.Status)
	}
	if len(m.ActorTypes) > MaxActorTypes {
		return fmt.Errorf("%d actor types exceeds %d", len(m.ActorTypes), MaxActorTypes)
	}
	for _, s := range m.ActorTypes {
		if len(s) > MaxActorTypeLen {
			return fmt.Errorf("actor type of %d bytes exceeds %d", len(s), MaxActorTypeLen)
		}
	}
	if len(m.Accusers) > MaxRecords {
		return fmt.Errorf("%d accusers exceeds %d", len(m.Accusers), MaxRecords)
	}
	for _, s := range m.Accusers {
		if len(s) > MaxAddrLen {
			return fmt.Errorf("accuser of %d bytes exceeds %d", len(s), MaxAddrLen)
		}
	}
	return nil
}
