package system_test

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/systemtest"
)

// An ask from one member to a key another member owns returns at its
// deadline while the owner's handler blocks without looking at its
// Context, whether the deadline is the context's or the ask timeout.
func TestAskToAnotherMemberReturnsAtItsDeadline(t *testing.T) {
	const d = 100 * time.Millisecond
	for _, tc := range systemtest.DeadlineCases(d) {
		t.Run(tc.Name, func(t *testing.T) {
			st := systemtest.NewStubborn("stubborn", tc.Opts...)
			systems := systemtest.StartCluster(t, 2, nil, st.Def)
			defer st.Release()
			key := keyPlacedOn(t, systems[0], systems[1], "stubborn", "s-")
			// Idle on its owner: the reader there may run the handler itself.
			st.ExpectAskDeadline(t, st.Def.Ref(systems[0], key), d, tc)
		})
	}
}
