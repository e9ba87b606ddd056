package replicanode

import (
	"encoding/binary"
	"slices"

	"github.com/troupe-go/troupe/internal/replica"
)

// envelopeVersion is the first byte of every envelope on the replication
// stream. A receiver drops an envelope of a newer version.
const envelopeVersion = 1

// An envelope packs the messages of one flush to one peer: the version
// byte, a uvarint count, then each message as a uvarint length and its
// replica encoding (which carries its own format version).

// appendEnvelope appends an envelope of the encoded messages in msgs,
// each given by its end offset in enc.
func appendEnvelope(b []byte, enc []byte, ends []int) []byte {
	b = append(b, envelopeVersion)
	b = binary.AppendUvarint(b, uint64(len(ends)))
	start := 0
	for _, end := range ends {
		b = binary.AppendUvarint(b, uint64(end-start))
		b = append(b, enc[start:end]...)
		start = end
	}
	return b
}

// decodeEnvelope returns the messages of an envelope, in order, decoded
// into fresh memory: b can be reused once it returns. Errors are
// *replica.DecodeError; an envelope that fails to decode gives none of its
// messages.
func decodeEnvelope(b []byte) ([]replica.Message, error) {
	return appendEnvelopeMessages(nil, b)
}

// appendEnvelopeMessages is decodeEnvelope appending to dst (the
// messages themselves are decoded into fresh memory); on an error dst is
// returned as it was.
func appendEnvelopeMessages(dst []replica.Message, b []byte) ([]replica.Message, error) {
	if len(b) == 0 {
		return dst, &replica.DecodeError{Offset: 0, Err: replica.ErrTruncated, What: "envelope version"}
	}
	if b[0] != envelopeVersion {
		if b[0] > envelopeVersion {
			return dst, &replica.DecodeError{Offset: 0, Err: replica.ErrUnsupportedVersion, What: "envelope version"}
		}
		return dst, &replica.DecodeError{Offset: 0, Err: replica.ErrMalformed, What: "envelope version"}
	}
	off := 1
	uvarint := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b[off:])
		switch {
		case n == 0:
			return 0, &replica.DecodeError{Offset: off, Err: replica.ErrTruncated, What: what}
		case n < 0 || (n > 1 && b[off+n-1] == 0):
			return 0, &replica.DecodeError{Offset: off, Err: replica.ErrMalformed, What: what}
		}
		off += n
		return v, nil
	}
	count, err := uvarint("envelope count")
	if err != nil {
		return dst, err
	}
	// Every message takes its length byte and its shortest encoding, so a
	// count beyond that is a lie.
	if count > uint64(len(b)-off)/(1+replica.MinMessageLen) {
		return dst, &replica.DecodeError{Offset: off, Err: replica.ErrMalformed, What: "envelope count"}
	}
	// A decoded message takes about ten times its shortest encoding in
	// memory, so the count sizes an allocation only once the framing
	// showed that count messages are really there.
	start := off
	for range count {
		n, err := uvarint("envelope message length")
		if err != nil {
			return dst, err
		}
		if n > uint64(len(b)-off) {
			return dst, &replica.DecodeError{Offset: off, Err: replica.ErrTruncated, What: "envelope message"}
		}
		off += int(n)
	}
	if off != len(b) {
		return dst, &replica.DecodeError{Offset: off, Err: replica.ErrMalformed, What: "envelope trailing bytes"}
	}
	off = start
	msgs := slices.Grow(dst, int(count))
	var names replica.Names // the envelope's messages share its peers' addresses
	for range count {
		n, err := uvarint("envelope message length")
		if err != nil {
			return dst, err
		}
		if n > uint64(len(b)-off) {
			return dst, &replica.DecodeError{Offset: off, Err: replica.ErrTruncated, What: "envelope message"}
		}
		m, err := replica.DecodeNames(b[off:off+int(n)], &names)
		if err != nil {
			if de, ok := err.(*replica.DecodeError); ok {
				de.Offset += off
			}
			return dst, err
		}
		off += int(n)
		msgs = append(msgs, m)
	}
	if off != len(b) {
		return dst, &replica.DecodeError{Offset: off, Err: replica.ErrMalformed, What: "envelope trailing bytes"}
	}
	return msgs, nil
}
