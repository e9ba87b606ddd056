package host

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestValidTraceParentFollowsTheSpecification(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", true}, // unknown flags are kept
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true}, // a later version, alone
		{"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true},
		{"", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", false},                              // short
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", false},                            // 00 has no more fields
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},                             // upper case
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},                             // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},                             // zero parent id
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},                             // version ff
		{"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},                             // version not hex
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},                             // separator
		{"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01", false},                             // separator
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01", false},                             // separator
		{"00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01", false},                             // trace id not hex
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bx-01", false},                             // parent id not hex
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x", false},                             // flags not hex
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false},                            // a later version: a dash after the flags
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\x00", false},                        // not visible
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + strings.Repeat("x", 201), false}, // over 256 bytes
	} {
		if why := ValidTraceParent(tc.s); (why == "") != tc.ok {
			t.Errorf("%q: reason %q, want valid %v", tc.s, why, tc.ok)
		}
	}
}

func TestValidTraceStateFollowsTheSpecification(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("k" + strconv.Itoa(i) + "=v")
		}
		return b.String()
	}
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"", true},
		{"congo=t61rcWkgMzE", true},
		{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true},
		{" rojo=1 ,\tcongo=2\t", true},    // spaces and tabs around members
		{"rojo=1,,congo=2", true},         // an empty member
		{"tenant1@vendor=x", true},        // multi-tenant
		{"0tenant@vendor=x", true},        // a tenant may start with a digit
		{"a_b-c*d/e=x y", true},           // every key character; a space inside a value
		{many(32), true},                  // the most members
		{many(33), false},                 // one too many
		{"rojo", false},                   // no '='
		{"Rojo=1", false},                 // upper case key
		{"1rojo=1", false},                // a simple key starts with a letter
		{"rojo=", false},                  // empty value
		{"rojo=a,b", false},               // ',' in a value (a member without '=')
		{"rojo=a=b", false},               // '=' in a value
		{"rojo=a ", true},                 // the trailing space is around the member
		{"rojo=1,rojo=2", false},          // repeated key
		{"t@1vendor=x", false},            // a system starts with a letter
		{"t@vendorvendorvendor=x", false}, // system too long
		{"rojo=\x7f", false},
		{"rojo=" + strings.Repeat("v", 257), false},
		{"k=" + strings.Repeat("v", 256) + ",l=" + strings.Repeat("v", 256), false}, // over 512 bytes
	} {
		if why := ValidTraceState(tc.s); (why == "") != tc.ok {
			t.Errorf("%q: reason %q, want valid %v", tc.s, why, tc.ok)
		}
	}
}

func TestATraceStateNeedsATraceParent(t *testing.T) {
	if why := ValidTrace(Trace{State: "rojo=1"}); why == "" {
		t.Fatal("a tracestate without a traceparent was accepted")
	}
	if why := ValidTrace(Trace{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "rojo=1"}); why != "" {
		t.Fatalf("a valid pair refused: %s", why)
	}
}

// traceParentModel is the specification's grammar of traceparent as a
// regular expression: the naive model ValidTraceParent is checked
// against.
var traceParentModel = regexp.MustCompile(`^(?:00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}|(?:[0-9a-e][0-9a-f]|f[0-9a-e])-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(?:-[!-~]*)?)$`)

// traceStateMember is one list member of tracestate as the
// specification's grammar spells it.
var traceStateMember = regexp.MustCompile(`^(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[ -+\--<>-~]{0,255}[!-+\--<>-~]$`)

// traceStateModel is ValidTraceState written naively: split, trim,
// match, count, look for repeats.
func traceStateModel(s string) bool {
	if len(s) > MaxTraceState {
		return false
	}
	seen := map[string]bool{}
	for _, m := range strings.Split(s, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		if !traceStateMember.MatchString(m) {
			return false
		}
		key := m[:strings.IndexByte(m, '=')]
		if seen[key] {
			return false
		}
		seen[key] = true
	}
	return len(seen) <= MaxTraceStateMembers
}

func FuzzValidTrace(f *testing.F) {
	f.Add("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
	f.Add("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later", "t@v=1, ,a=b c")
	f.Add("00-00000000000000000000000000000000-b7ad6b7169203331-01", "a=1,a=2")
	f.Add("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "A=1")
	f.Fuzz(func(t *testing.T, parent, state string) {
		whyParent := ValidTraceParent(parent)
		model := traceParentModel.MatchString(parent) && len(parent) <= MaxTraceParent &&
			!allZeros(parent[3:35]) && !allZeros(parent[36:52])
		if (whyParent == "") != model {
			t.Fatalf("traceparent %q: reason %q, the grammar says valid %v", parent, whyParent, model)
		}
		whyState := ValidTraceState(state)
		if (whyState == "") != traceStateModel(state) {
			t.Fatalf("tracestate %q: reason %q, the grammar says valid %v", state, whyState, !(whyState == ""))
		}
	})
}
