package system_test

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// The gated actor records the tells it handles; its first one waits for
// the test to open the gate, so that its small mailbox fills.
type (
	GMsg  interface{ gmsg() }
	GTell struct{ N int }
	GSeen struct{ actor.Reply[GMsg, []int] }
)

func (GTell) gmsg() {}
func (GSeen) gmsg() {}

var gates = struct {
	sync.Mutex
	open map[string]chan struct{}
}{open: map[string]chan struct{}{}}

func gateOf(key string) chan struct{} {
	gates.Lock()
	defer gates.Unlock()
	ch, ok := gates.open[key]
	if !ok {
		ch = make(chan struct{})
		gates.open[key] = ch
	}
	return ch
}

// gatedMailbox is the gated actor's mailbox bound; it refuses local
// senders beyond it.
const gatedMailbox = 4

var gated = actor.Define("gated", func(c *actor.Context[[]int, GMsg], m GMsg) error {
	switch m := m.(type) {
	case GTell:
		if len(c.State()) == 0 {
			<-gateOf(c.Key())
		}
		c.SetState(append(c.State(), m.N))
	case GSeen:
		return actor.Respond(c, m, slices.Clone(c.State()))
	}
	return nil
}, actor.WithMailbox(gatedMailbox, actor.Refuse)).WithMessages(GTell{}, GSeen{})

// Tells from another member into a full mailbox are neither refused nor
// dropped, whatever the overflow policy: the owner holds the stream until
// there is room, and every tell is handled, in order.
func TestRemoteTellsIntoAFullMailboxWaitForRoom(t *testing.T) {
	systems := startCluster(t, 2, gated)
	key := ""
	prefix := stallID(t) // a gate of its own, even across -count runs
	for i := range 10000 {
		k := prefix + "-" + strconv.Itoa(i)
		if system.OwnerOf(systems[0], "gated", k) == systems[1].Addr() {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatal("no key placed on the second member")
	}
	ctx := systemtest.Ctx(t)
	ref := gated.Ref(systems[0], key)
	const n = 300 // several batches, most of them beyond the mailbox
	for i := range n {
		if err := ref.Tell(ctx, GTell{N: i}); err != nil {
			t.Fatalf("tell %d: %v", i, err)
		}
	}
	systemtest.WaitUntil(t, "the owner's mailbox to fill", func() bool { return systems[1].Stats().Queued >= gatedMailbox })
	close(gateOf(key))
	// The ask is refused while the mailbox is full (the Refuse policy
	// applies to asks): ask again until every tell was handled.
	var seen []int
	systemtest.WaitUntil(t, "every tell handled", func() bool {
		var err error
		seen, err = actor.Ask(ctx, ref, GSeen{})
		if errors.Is(err, actor.ErrMailboxFull) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(seen) >= n
	})
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("handled %d tells %v..., want 0..%d in order", len(seen), seen[:min(len(seen), 10)], n-1)
	}
}
