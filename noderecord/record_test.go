package noderecord

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupe-go/troupe/internal/membership"
)

func TestValidateAcceptsAFullRecordAndOneAtEveryLimit(t *testing.T) {
	for name, r := range map[string]Record{"full": full(), "largest": largest(), "minimal": {Cluster: "c", Node: "n", Role: "r", Incarnation: "i"}} {
		if err := r.Validate(); err != nil {
			t.Errorf("%s: Validate = %v, want nil", name, err)
		}
	}
}

func TestValidateRefusesEachFieldOverItsLimitAsTooLarge(t *testing.T) {
	cases := map[string]func(*Record){
		"Cluster":      func(r *Record) { r.Cluster = strings.Repeat("c", MaxFieldBytes+1) },
		"Node":         func(r *Record) { r.Node = strings.Repeat("n", MaxFieldBytes+1) },
		"Role":         func(r *Record) { r.Role = strings.Repeat("r", MaxFieldBytes+1) },
		"Incarnation":  func(r *Record) { r.Incarnation = strings.Repeat("i", MaxFieldBytes+1) },
		"DataAddr":     func(r *Record) { r.DataAddr = strings.Repeat("d", MaxFieldBytes+1) },
		"AdminAddr":    func(r *Record) { r.AdminAddr = strings.Repeat("a", MaxFieldBytes+1) },
		"BuildVersion": func(r *Record) { r.BuildVersion = strings.Repeat("v", MaxFieldBytes+1) },
		"Labels":       func(r *Record) { r.Labels = largest().Labels; r.Labels["one-more"] = "x" },
		"Labels key":   func(r *Record) { r.Labels = map[string]string{strings.Repeat("k", MaxLabelKeyBytes+1): "v"} },
		`Labels["zone"]`: func(r *Record) {
			r.Labels = map[string]string{"zone": strings.Repeat("v", MaxFieldBytes+1)}
		},
	}
	for field, breakIt := range cases {
		r := full()
		breakIt(&r)
		err := r.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, field) {
			t.Errorf("%s over its limit: Validate = %v, want a *FieldError naming %s", field, err, field)
			continue
		}
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalidRecord) || fe.Size <= fe.Limit {
			t.Errorf("%s over its limit: %v should match ErrTooLarge and ErrInvalidRecord with Size > Limit", field, err)
		}
	}
}

func TestValidateRefusesMalformedFieldsAsInvalidButNotTooLarge(t *testing.T) {
	cases := map[string]func(*Record){
		"Cluster":                 func(r *Record) { r.Cluster = "" },
		"Node":                    func(r *Record) { r.Node = "a/b" },
		"Role":                    func(r *Record) { r.Role = "mem\x00ber" },
		"Incarnation":             func(r *Record) { r.Incarnation = "" },
		"DataAddr":                func(r *Record) { r.DataAddr = "\xff\xfe" },
		"Health":                  func(r *Record) { r.Health = healthEnd },
		"Counters.ReplicationLag": func(r *Record) { r.Counters.ReplicationLag = -1 },
		"Labels":                  func(r *Record) { r.Labels = map[string]string{"": "v"} },
		`Labels["zone"]`:          func(r *Record) { r.Labels = map[string]string{"zone": "a\nb"} },
	}
	for field, breakIt := range cases {
		r := full()
		breakIt(&r)
		err := r.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("malformed %s: Validate = %v, want a *FieldError naming %s", field, err, field)
			continue
		}
		if !errors.Is(err, ErrInvalidRecord) || errors.Is(err, ErrTooLarge) {
			t.Errorf("malformed %s: %v should match ErrInvalidRecord and not ErrTooLarge", field, err)
		}
	}
}

func TestKeyValidateAndValidateClusterCheckIDsAsTheRecordDoes(t *testing.T) {
	if err := (Key{Cluster: "c", Role: "r", Node: "n"}).Validate(); err != nil {
		t.Errorf("valid key: %v", err)
	}
	if err := (Key{Cluster: "c", Role: "", Node: "n"}).Validate(); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("key without a role: %v, want ErrInvalidRecord", err)
	}
	if err := ValidateCluster("a/b"); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("cluster with '/': %v, want ErrInvalidRecord", err)
	}
}

func TestValidateRoleAndLabelsCheckAsTheRecordDoes(t *testing.T) {
	if err := ValidateRole("member"); err != nil {
		t.Errorf("role member: %v", err)
	}
	for _, role := range []string{"", "a/b", "a\nb", strings.Repeat("r", MaxFieldBytes+1)} {
		if err := ValidateRole(role); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("role %q: %v, want ErrInvalidRecord", role, err)
		}
	}
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for name, labels := range map[string]map[string]string{
		"too many":   many,
		"empty key":  {"": "v"},
		"long key":   {strings.Repeat("k", MaxLabelKeyBytes+1): "v"},
		"long value": {"zone": strings.Repeat("v", MaxFieldBytes+1)},
		"control":    {"zone": "a\x00"},
	} {
		err := ValidateLabels(labels)
		r := Record{Cluster: "c", Node: "n", Role: "r", Incarnation: "i", Labels: labels}
		if !errors.Is(err, ErrInvalidRecord) || errors.Is(err, ErrTooLarge) != errors.Is(r.Validate(), ErrTooLarge) || err.Error() != r.Validate().Error() {
			t.Errorf("%s: ValidateLabels = %v, Validate = %v; want the same ErrInvalidRecord", name, err, r.Validate())
		}
	}
	if err := ValidateLabels(map[string]string{"zone": "", "region": "eu"}); err != nil {
		t.Errorf("an empty value: %v, want nil", err)
	}
}

func TestHealthAndDecisionNameThemselves(t *testing.T) {
	for h, want := range map[Health]string{HealthUnknown: "unknown", Healthy: "healthy", Degraded: "degraded", Unhealthy: "unhealthy", 9: "health(9)"} {
		if h.String() != want {
			t.Errorf("Health(%d).String() = %q, want %q", uint8(h), h.String(), want)
		}
	}
	for d, want := range map[Decision]string{Inserted: "inserted", Restarted: "restarted", Advanced: "advanced", Duplicate: "duplicate", Stale: "stale", 0: "decision(0)"} {
		if d.String() != want {
			t.Errorf("Decision(%d).String() = %q, want %q", uint8(d), d.String(), want)
		}
	}
}

func TestEveryMembersAddressFitsARecord(t *testing.T) {
	if MaxFieldBytes < membership.MaxAddrLen {
		t.Errorf("MaxFieldBytes = %d, below membership's MaxAddrLen %d: a member's address could not be its Node", MaxFieldBytes, membership.MaxAddrLen)
	}
}
