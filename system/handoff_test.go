package system_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/systemtest"
	"github.com/troupe-go/troupe/system"
)

// BlobMsg is the message of a durable actor whose state is a byte slice.
type BlobMsg interface{ blobMsg() }

// SetBlob replaces the state and answers its length.
type SetBlob struct {
	actor.Reply[BlobMsg, int]
	Data []byte
}

func (SetBlob) blobMsg() {}

func blobDef(name string, opts ...actor.Option) *actor.Def[[]byte, BlobMsg] {
	return actor.Define(name, func(c *actor.Context[[]byte, BlobMsg], m BlobMsg) error {
		if m, ok := m.(SetBlob); ok {
			c.SetState(m.Data)
			return actor.Respond(c, m, len(m.Data))
		}
		return nil
	}, opts...).WithMessages(SetBlob{})
}

// setBlob stores size bytes, pseudo-random from seed, in ref's state.
func setBlob(t *testing.T, ref actor.Ref[BlobMsg], size, seed int) {
	t.Helper()
	data := make([]byte, size)
	rnd := rand.New(rand.NewPCG(uint64(seed), 1))
	for i := range data {
		data[i] = byte(rnd.Uint32())
	}
	if _, err := actor.Ask(systemtest.Ctx(t), ref, SetBlob{Data: data}); err != nil {
		t.Fatalf("store %d bytes in %v: %v", size, ref, err)
	}
}

// waitCaughtUp waits until no member of systems receives a range.
func waitCaughtUp(t *testing.T, systems []*system.System) {
	t.Helper()
	systemtest.Await(t, func() error {
		for _, s := range systems {
			if n := s.Stats().Receiving; n > 0 {
				return fmt.Errorf("%s still receives %d ranges", s.Addr(), n)
			}
		}
		return nil
	})
}

// A key's state follows it to new replicas across successive ring changes
// while the key is not used at all: two members join and then the two
// first members leave, so that many keys end with none of the replicas
// that acknowledged their write. Each new replica received its ranges
// before it counted, so every count is still there.
func TestStateFollowsItsKeysAcrossJoinsAndLeavesWithoutBeingUsed(t *testing.T) {
	def := counterDef("hcounter", nil, actor.WithReplicas(3, actor.WriteMajority))
	systems := systemtest.StartCluster(t, 3, nil, def)
	waitCaughtUp(t, systems)
	const keys = 60
	for i := range keys {
		add(t, def.Ref(systems[i%len(systems)], "k"+strconv.Itoa(i)), i+1)
	}
	for range 2 {
		s := systemtest.Join(t, []string{systems[0].Addr()}, nil, def)
		systems = append(systems, s)
		systemtest.WaitAlive(t, systems, len(systems))
		waitCaughtUp(t, systems)
		if got := s.Stats().ReceivedBytes; got == 0 {
			t.Fatalf("%s joined and received no state", s.Addr())
		}
	}
	for range 2 {
		closeNow(t, systems[0])
		systems = systems[1:]
		systemtest.WaitAlive(t, systems, len(systems))
		waitCaughtUp(t, systems)
	}
	expectCounts(t, def, systems, keys, "after the ring changed four times")
}

// An orderly leave hands the copies over before the member goes: keys
// kept as a single copy on the leaving member keep their state on the
// members that take them over, though the key is not used meanwhile and
// the member that held the only copy is gone.
func TestAnOrderlyLeaveHandsItsSingleCopiesOver(t *testing.T) {
	def := counterDef("lcounter", nil, actor.Durable())
	systems := systemtest.StartCluster(t, 3, nil, def)
	waitCaughtUp(t, systems)
	const keys = 30
	for i := range keys {
		add(t, def.Ref(systems[0], "k"+strconv.Itoa(i)), i+1)
	}
	leaver := systems[2]
	held := 0
	for i := range keys {
		if system.OwnerOf(systems[0], "lcounter", "k"+strconv.Itoa(i)) == leaver.Addr() {
			held++
		}
	}
	if held == 0 {
		t.Fatal("the leaving member holds none of the keys")
	}
	closeNow(t, leaver)
	systems = systems[:2]
	systemtest.WaitAlive(t, systems, 2)
	waitCaughtUp(t, systems)
	expectCounts(t, def, systems, keys, "after its only copy's member left")
	t.Logf("%d of %d keys were held by the member that left", held, keys)
}

// CatchUpRate paces what a joining member copies: with 64 KiB/s and
// about half a megabyte of state to receive, it is still receiving a
// second after it joined (the default rate copies it in milliseconds).
func TestCatchUpRatePacesAJoiningMembersCopy(t *testing.T) {
	def := counterDef("rcounter", nil, actor.WithReplicas(3, actor.WriteMajority))
	blob := blobDef("rblob", actor.WithReplicas(3, actor.WriteMajority))
	systems := systemtest.StartCluster(t, 3, nil, def, blob)
	waitCaughtUp(t, systems)
	for i := range 64 {
		setBlob(t, blob.Ref(systems[0], "b"+strconv.Itoa(i)), 8<<10, i)
	}
	s := systemtest.Join(t, []string{systems[0].Addr()}, func(cfg *system.Config) { cfg.CatchUpRate = 64 << 10 }, def, blob)
	joined := time.Now()
	systemtest.WaitUntil(t, "the member receiving", func() bool { return s.Stats().Receiving > 0 || s.Stats().ReceivedBytes > 0 })
	time.Sleep(time.Until(joined.Add(time.Second))) // the property is a pace: it needs time to pass
	if st := s.Stats(); st.Receiving == 0 {
		t.Fatalf("a second after joining at 64 KiB/s the member received everything (%d bytes)", st.ReceivedBytes)
	}
}

// A member that leaves in order gives its ranges to others, whose copies
// fence them at the previous replicas naming its departure: the floors of
// the members that stay name it, so that an owner whose view still holds
// the member that left cannot acquire over the set it gave the key
// (docs/replication.md, "Leaves and removals"). Its keys keep their state.
func TestTheFloorsOfALeavesHandOffNameTheMemberThatLeft(t *testing.T) {
	def := counterDef("fcounter", nil, actor.WithReplicas(3, actor.WriteMajority))
	systems := systemtest.StartCluster(t, 4, nil, def)
	waitCaughtUp(t, systems)
	const keys = 40
	for i := range keys {
		add(t, def.Ref(systems[i%len(systems)], "k"+strconv.Itoa(i)), i+1)
	}
	leaving := systems[3]
	gone := system.NodeIDOf(leaving)
	closeNow(t, leaving)
	systems = systems[:3]
	systemtest.WaitAlive(t, systems, len(systems))
	waitCaughtUp(t, systems)
	named := 0
	for _, s := range systems {
		for _, f := range system.FloorsOf(t, s) {
			if slices.Contains(f.Departed, gone) {
				named++
			}
		}
	}
	if named == 0 {
		t.Fatalf("no floor of the members that stayed names %v, which left", gone)
	}
	expectCounts(t, def, systems, keys, fmt.Sprintf("after %v left", gone))
}

// expectCounts checks that each of keys counters k0, k1, ... asked through
// the systems in turn reads its index plus one (what the test added to it)
// once its owner answers; when tells what happened meanwhile.
func expectCounts(t *testing.T, def *actor.Def[int, CountMsg], systems []*system.System, keys int, when string) {
	t.Helper()
	for i := range keys {
		ref := def.Ref(systems[i%len(systems)], "k"+strconv.Itoa(i))
		got := eventually(t, "read "+ref.Key(), func(ctx context.Context) (int, error) {
			return actor.Ask(ctx, ref, DGet{})
		})
		if got != i+1 {
			t.Errorf("%s: count %d %s, want %d", ref.Key(), got, when, i+1)
		}
	}
}
