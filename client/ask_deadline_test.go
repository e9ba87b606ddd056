package client_test

import (
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/systemtest"
)

// An ask through a client returns at its deadline while the owner's
// handler blocks without looking at its Context, whether the deadline is
// the context's or the ask timeout.
func TestClientAskReturnsAtItsDeadline(t *testing.T) {
	const d = 100 * time.Millisecond
	for _, tc := range systemtest.DeadlineCases(d) {
		t.Run(tc.Name, func(t *testing.T) {
			st := systemtest.NewStubborn("stubborn", tc.Opts...)
			systems := systemtest.StartCluster(t, 2, nil, st.Def)
			c := newClient(t, systems[0].Addr())
			defer st.Release()
			// Idle on its owner: the reader there may run the handler itself.
			st.ExpectAskDeadline(t, st.Def.Ref(c, "k"), d, tc)
		})
	}
}
