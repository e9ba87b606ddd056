package noderecord

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of a record. Validate refuses a record over any of them with a
// *FieldError that matches ErrTooLarge; Decode refuses input over
// MaxEncodedBytes before it reads a field.
const (
	// MaxFieldBytes bounds each string field: the ids (Cluster, Node,
	// Role, Incarnation), the addresses, BuildVersion and a label's
	// value.
	MaxFieldBytes = 256
	// MaxLabels bounds the number of labels.
	MaxLabels = 16
	// MaxLabelKeyBytes bounds a label's key.
	MaxLabelKeyBytes = 63
	// MaxEncodedBytes bounds a whole encoded record. A record within the
	// field limits encodes to well under it; the bound is for input.
	MaxEncodedBytes = 16 << 10
)

// Health is what a process says of itself. The zero value is
// HealthUnknown.
type Health uint8

// The health states. Readiness is separate (Record.Ready): a healthy
// process can be out of service on purpose, while it drains say.
const (
	// HealthUnknown: the process has not said, or cannot tell.
	HealthUnknown Health = iota
	// Healthy: the process serves normally.
	Healthy
	// Degraded: the process serves, with a problem an operator should
	// see (a lagging replica, a full mailbox).
	Degraded
	// Unhealthy: the process cannot serve as it should.
	Unhealthy
	healthEnd
)

func (h Health) String() string {
	switch h {
	case HealthUnknown:
		return "unknown"
	case Healthy:
		return "healthy"
	case Degraded:
		return "degraded"
	case Unhealthy:
		return "unhealthy"
	}
	return fmt.Sprintf("health(%d)", uint8(h))
}

// Key names a record in a store: one per node of a cluster. The etcd
// backend lays it out as /troupe/clusters/<Cluster>/nodes/<Role>/<Node>.
type Key struct {
	Cluster string
	Role    string
	Node    string
}

func (k Key) String() string { return k.Cluster + "/" + k.Role + "/" + k.Node }

// Validate checks the key's three ids as Record.Validate does.
func (k Key) Validate() error {
	for _, f := range []struct{ name, v string }{{"Cluster", k.Cluster}, {"Role", k.Role}, {"Node", k.Node}} {
		if err := checkID(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// Record is what one process publishes about itself: bounded, and
// rebuilt from the live process whenever it is lost. It holds no
// secrets, no keys of actors and no time series.
type Record struct {
	// Cluster is the cluster's id (cluster.Config.ClusterName).
	Cluster string
	// Node is the process's stable id within the cluster: the same across
	// restarts (its advertised address, for a member).
	Node string
	// Role says what the process is ("member", "client").
	Role string
	// Incarnation is random, chosen when the process starts: a new one
	// means the process restarted, and its Seq starts again.
	Incarnation string
	// DataAddr is the address peers and clients dial; AdminAddr serves
	// health, metrics and the API. Either is empty when absent.
	DataAddr  string
	AdminAddr string
	// BuildVersion is the Troupe module's version the process runs.
	BuildVersion string
	// Started is when the process started. Stored in milliseconds.
	Started time.Time
	// Seq is the heartbeat sequence: 0 at the first record of an
	// incarnation, and greater in each later one.
	Seq uint64
	// Observed is when the store accepted this record, by the clock of
	// the store (the memory backend) or of the writing process (etcd):
	// see the package doc, "Clocks". Put sets it; what the caller puts
	// there is replaced. Stored in milliseconds.
	Observed time.Time
	// Health is what the process says of itself; ready is separate.
	Health Health
	// Ready is set while the process takes work (its /readyz).
	Ready bool
	// Counters are cumulative since Started.
	Counters Counters
	// Labels describe where the process runs (region, zone, host). At
	// most MaxLabels, no secrets.
	Labels map[string]string
}

// Counters is a snapshot of a process's counters, cumulative since it
// started, so that a view without Prometheus can say something.
type Counters struct {
	Messages    uint64 // messages handled (tells and asks)
	Errors      uint64 // messages whose handling failed
	Activations uint64 // actor activations started
	Bytes       uint64 // wire bytes sent and received
	// ReplicationLag is how far the process's replicas trail their
	// primaries; zero when caught up or when it keeps no replicas.
	// Stored in milliseconds.
	ReplicationLag time.Duration
}

// Key returns the record's key.
func (r Record) Key() Key { return Key{Cluster: r.Cluster, Role: r.Role, Node: r.Node} }

// Validate reports the first field that breaks the record's limits or
// form, as a *FieldError. Ids (Cluster, Role, Node) are non-empty UTF-8
// with no '/' and no control characters, since they name the record's
// key; Incarnation is non-empty; addresses, the version and labels are
// UTF-8 without control characters.
func (r Record) Validate() error {
	if err := r.Key().Validate(); err != nil {
		return err
	}
	if r.Incarnation == "" {
		return &FieldError{Field: "Incarnation", Reason: "is empty"}
	}
	for _, f := range []struct {
		name, v string
		limit   int
	}{
		{"Incarnation", r.Incarnation, MaxFieldBytes},
		{"DataAddr", r.DataAddr, MaxFieldBytes},
		{"AdminAddr", r.AdminAddr, MaxFieldBytes},
		{"BuildVersion", r.BuildVersion, MaxFieldBytes},
	} {
		if err := checkText(f.name, f.v, f.limit); err != nil {
			return err
		}
	}
	if r.Health >= healthEnd {
		return &FieldError{Field: "Health", Reason: fmt.Sprintf("unknown state %d", r.Health)}
	}
	if r.Counters.ReplicationLag < 0 {
		return &FieldError{Field: "Counters.ReplicationLag", Reason: "is negative"}
	}
	return ValidateLabels(r.Labels)
}

// ValidateLabels checks labels as Validate checks Record.Labels: at most
// MaxLabels, keys not empty and within MaxLabelKeyBytes, values within
// MaxFieldBytes, all UTF-8 without control characters.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return &FieldError{Field: "Labels", Reason: "entries", Size: len(labels), Limit: MaxLabels}
	}
	// Sorted, so that the same labels always report the same field.
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := validateLabel(k, labels[k]); err != nil {
			return err
		}
	}
	return nil
}

// validateLabel checks one label as ValidateLabels does.
func validateLabel(key, value string) error {
	if key == "" {
		return &FieldError{Field: "Labels", Reason: "a key is empty"}
	}
	if err := checkText("Labels key "+quote(key), key, MaxLabelKeyBytes); err != nil {
		return err
	}
	return checkText("Labels["+quote(key)+"]", value, MaxFieldBytes)
}

func checkID(field, v string) error {
	if v == "" {
		return &FieldError{Field: field, Reason: "is empty"}
	}
	if err := checkText(field, v, MaxFieldBytes); err != nil {
		return err
	}
	if strings.Contains(v, "/") {
		return &FieldError{Field: field, Reason: "contains '/', which would break the key layout"}
	}
	return nil
}

func checkText(field, v string, limit int) error {
	if len(v) > limit {
		return &FieldError{Field: field, Reason: "bytes", Size: len(v), Limit: limit}
	}
	if !utf8.ValidString(v) {
		return &FieldError{Field: field, Reason: "is not valid UTF-8"}
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return &FieldError{Field: field, Reason: "contains a control character"}
	}
	return nil
}

// quote shortens a label key for an error message: it may be the
// oversized one.
func quote(k string) string {
	const most = 70
	if len(k) > most {
		k = k[:most] + "…"
	}
	return fmt.Sprintf("%q", k)
}

// ValidateCluster checks a cluster id as Validate checks Record.Cluster.
func ValidateCluster(cluster string) error { return checkID("Cluster", cluster) }

// ValidateRole checks a role as Validate checks Record.Role.
func ValidateRole(role string) error { return checkID("Role", role) }
