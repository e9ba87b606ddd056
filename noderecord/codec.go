package noderecord

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// FormatVersion is the record format this binary writes. It only moves
// forward, and only for a change an older reader would misread: a field
// added within a version is skipped by readers that do not know it.
// Decode refuses a newer version with ErrUnsupportedVersion.
const FormatVersion = 1

// The encoded form is a msgpack map whose first entry is the version,
// so that a reader checks it before anything else. Times are Unix
// milliseconds (0 for the zero time), durations milliseconds.
const (
	fVersion      = "v"
	fCluster      = "cluster"
	fNode         = "node"
	fRole         = "role"
	fIncarnation  = "incarnation"
	fDataAddr     = "data_addr"
	fAdminAddr    = "admin_addr"
	fBuildVersion = "build_version"
	fStartedMs    = "started_ms"
	fSeq          = "seq"
	fObservedMs   = "observed_ms"
	fHealth       = "health"
	fReady        = "ready"
	fCounters     = "counters"
	fLabels       = "labels"

	cMessages         = "messages"
	cErrors           = "errors"
	cActivations      = "activations"
	cBytes            = "bytes"
	cReplicationLagMs = "replication_lag_ms"
)

// Encode validates r and encodes it at FormatVersion.
func Encode(r Record) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	n := 14
	if len(r.Labels) > 0 {
		n++
	}
	err := errors.Join(
		e.EncodeMapLen(n),
		e.EncodeString(fVersion), e.EncodeUint(FormatVersion),
		e.EncodeString(fCluster), e.EncodeString(r.Cluster),
		e.EncodeString(fNode), e.EncodeString(r.Node),
		e.EncodeString(fRole), e.EncodeString(r.Role),
		e.EncodeString(fIncarnation), e.EncodeString(r.Incarnation),
		e.EncodeString(fDataAddr), e.EncodeString(r.DataAddr),
		e.EncodeString(fAdminAddr), e.EncodeString(r.AdminAddr),
		e.EncodeString(fBuildVersion), e.EncodeString(r.BuildVersion),
		e.EncodeString(fStartedMs), e.EncodeInt(unixMilli(r.Started)),
		e.EncodeString(fSeq), e.EncodeUint(r.Seq),
		e.EncodeString(fObservedMs), e.EncodeInt(unixMilli(r.Observed)),
		e.EncodeString(fHealth), e.EncodeUint(uint64(r.Health)),
		e.EncodeString(fReady), e.EncodeBool(r.Ready),
		e.EncodeString(fCounters), e.EncodeMapLen(5),
		e.EncodeString(cMessages), e.EncodeUint(r.Counters.Messages),
		e.EncodeString(cErrors), e.EncodeUint(r.Counters.Errors),
		e.EncodeString(cActivations), e.EncodeUint(r.Counters.Activations),
		e.EncodeString(cBytes), e.EncodeUint(r.Counters.Bytes),
		e.EncodeString(cReplicationLagMs), e.EncodeUint(uint64(r.Counters.ReplicationLag.Milliseconds())),
	)
	if err == nil && len(r.Labels) > 0 {
		err = errors.Join(e.EncodeString(fLabels), e.EncodeMapLen(len(r.Labels)))
		// Sorted, so that a record always encodes to the same bytes.
		for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
			err = errors.Join(err, e.EncodeString(k), e.EncodeString(r.Labels[k]))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("troupe: encode node record %s: %w", r.Key(), err)
	}
	if buf.Len() > MaxEncodedBytes {
		// The field limits keep a record far below this; a guard, not a path.
		return nil, fmt.Errorf("troupe: encode node record %s: %w: %d bytes, limit %d", r.Key(), ErrTooLarge, buf.Len(), MaxEncodedBytes)
	}
	return buf.Bytes(), nil
}

// Decode decodes and validates a record. It returns ErrTooLarge for
// input over MaxEncodedBytes, ErrUnsupportedVersion for a newer format,
// and ErrMalformed for anything else that is not a valid record (with
// the *FieldError, when a field breaks its limits, for errors.As).
// Times come back in UTC, to the millisecond.
func Decode(b []byte) (Record, error) {
	if len(b) > MaxEncodedBytes {
		return Record{}, fmt.Errorf("troupe: decode node record: %w: %d bytes, limit %d", ErrTooLarge, len(b), MaxEncodedBytes)
	}
	if err := checkShape(b); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	r, err := decode(msgpack.NewDecoder(bytes.NewReader(b)))
	if err != nil {
		if errors.Is(err, ErrUnsupportedVersion) {
			return Record{}, err
		}
		return Record{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := r.Validate(); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return r, nil
}

func decode(d *msgpack.Decoder) (Record, error) {
	var r Record
	n, err := d.DecodeMapLen()
	if err != nil {
		return r, err
	}
	if n < 1 {
		return r, errors.New("not a map with a version")
	}
	if k, err := d.DecodeString(); err != nil || k != fVersion {
		return r, errors.New("the first entry is not the version")
	}
	v, err := d.DecodeUint64()
	switch {
	case err != nil:
		return r, fmt.Errorf("version: %w", err)
	case v == 0:
		return r, errors.New("version 0")
	case v > FormatVersion:
		return r, fmt.Errorf("%w: version %d, this binary reads up to %d", ErrUnsupportedVersion, v, FormatVersion)
	}
	seen := map[string]bool{fVersion: true}
	for range n - 1 {
		k, err := d.DecodeString()
		if err != nil {
			return r, fmt.Errorf("field name: %w", err)
		}
		if seen[k] {
			return r, fmt.Errorf("field %q twice", k)
		}
		seen[k] = true
		if err := decodeField(d, k, &r); err != nil {
			return r, fmt.Errorf("%s: %w", k, err)
		}
	}
	for _, k := range []string{fCluster, fNode, fRole, fIncarnation, fSeq} {
		if !seen[k] {
			return r, fmt.Errorf("field %q missing", k)
		}
	}
	return r, nil
}

func decodeField(d *msgpack.Decoder, k string, r *Record) error {
	var err error
	switch k {
	case fCluster:
		r.Cluster, err = d.DecodeString()
	case fNode:
		r.Node, err = d.DecodeString()
	case fRole:
		r.Role, err = d.DecodeString()
	case fIncarnation:
		r.Incarnation, err = d.DecodeString()
	case fDataAddr:
		r.DataAddr, err = d.DecodeString()
	case fAdminAddr:
		r.AdminAddr, err = d.DecodeString()
	case fBuildVersion:
		r.BuildVersion, err = d.DecodeString()
	case fStartedMs:
		r.Started, err = decodeTime(d)
	case fSeq:
		r.Seq, err = d.DecodeUint64()
	case fObservedMs:
		r.Observed, err = decodeTime(d)
	case fHealth:
		var h uint64
		h, err = d.DecodeUint64()
		if err == nil && h >= uint64(healthEnd) {
			err = fmt.Errorf("unknown state %d", h)
		}
		r.Health = Health(h)
	case fReady:
		r.Ready, err = d.DecodeBool()
	case fCounters:
		err = decodeCounters(d, &r.Counters)
	case fLabels:
		r.Labels, err = decodeLabels(d)
	default:
		// A field of a later release of the same version.
		err = d.Skip()
	}
	return err
}

func decodeCounters(d *msgpack.Decoder, c *Counters) error {
	n, err := d.DecodeMapLen()
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for range max(n, 0) {
		k, err := d.DecodeString()
		if err != nil {
			return err
		}
		if seen[k] {
			return fmt.Errorf("counter %q twice", k)
		}
		seen[k] = true
		switch k {
		case cMessages:
			c.Messages, err = d.DecodeUint64()
		case cErrors:
			c.Errors, err = d.DecodeUint64()
		case cActivations:
			c.Activations, err = d.DecodeUint64()
		case cBytes:
			c.Bytes, err = d.DecodeUint64()
		case cReplicationLagMs:
			var ms uint64
			ms, err = d.DecodeUint64()
			if err == nil && ms > math.MaxInt64/uint64(time.Millisecond) {
				err = fmt.Errorf("replication lag of %d ms overflows", ms)
			}
			c.ReplicationLag = time.Duration(ms) * time.Millisecond
		default:
			err = d.Skip()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func decodeLabels(d *msgpack.Decoder) (map[string]string, error) {
	n, err := d.DecodeMapLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if n > MaxLabels {
		return nil, &FieldError{Field: "Labels", Reason: "entries", Size: n, Limit: MaxLabels}
	}
	labels := make(map[string]string, n)
	for range n {
		k, err := d.DecodeString()
		if err != nil {
			return nil, err
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("label %q twice", k)
		}
		if labels[k], err = d.DecodeString(); err != nil {
			return nil, err
		}
	}
	return labels, nil
}

func decodeTime(d *msgpack.Decoder) (time.Time, error) {
	ms, err := d.DecodeInt64()
	if err != nil || ms == 0 {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
