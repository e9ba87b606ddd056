package membership

import (
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/troupe-go/troupe/cluster"
	"github.com/troupe-go/troupe/ring"
)

var t0 = time.Unix(1000, 0).UTC()

func newTestCore(t *testing.T, a string) *Core {
	t.Helper()
	c, err := NewCore(cluster.FastConfig(a), 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func peer(a string) Member {
	return Member{ID: ring.NodeID{Addr: a, Incarnation: 1}, Status: StatusAlive}
}

// befriend makes p a member and an active neighbour of c.
func befriend(c *Core, p Member) {
	c.Step(Message{Type: MsgNeighbour, From: p.ID, Records: []Member{p}})
	c.Ready()
}

func statusIn(c *Core, id ring.NodeID) Status {
	m, _ := c.Member(id)
	return m.Status
}

func TestBytesKeepANeighbourAliveOnlyUpToDeadAfterPastItsLastFrame(t *testing.T) {
	c := newTestCore(t, "a:1")
	b := peer("b:1")
	befriend(c, b)
	tick := fast.Heartbeat / 4
	var suspectedAt time.Duration
	for now := t0; now.Sub(t0) < 10*fast.SuspectAfter; now = now.Add(tick) {
		// The peer's transport keeps delivering bytes, but its placement
		// loop sends no membership frame after the first.
		c.Heard(b.ID.Addr, now)
		c.Tick(now)
		c.Ready()
		if statusIn(c, b.ID) == StatusSuspect && suspectedAt == 0 {
			suspectedAt = now.Sub(t0)
		}
	}
	want := fast.DeadAfter + fast.SuspectAfter
	if suspectedAt < want || suspectedAt > want+tick {
		t.Fatalf("expected a peer whose loop is wedged but whose bytes flow to be suspected %v after its last frame; suspected after %v", want, suspectedAt)
	}
}

func TestBytesAloneKeepAPeerFromSuspicionWhileFramesFlow(t *testing.T) {
	c := newTestCore(t, "a:1")
	b := peer("b:1")
	befriend(c, b)
	for now := t0; now.Sub(t0) < 5*fast.SuspectAfter; now = now.Add(fast.Heartbeat / 4) {
		// Frames only every 3×SuspectAfter/4 (a slow link), bytes always.
		if now.Sub(t0)%(3*fast.SuspectAfter/4) == 0 {
			c.Tick(now)
			c.Step(Message{Type: MsgAck, From: b.ID})
		}
		c.Heard(b.ID.Addr, now)
		c.Tick(now)
		c.Ready()
		if st := statusIn(c, b.ID); st != StatusAlive {
			t.Fatalf("expected bytes between frames to keep the peer alive; it became %v at %v", st, now.Sub(t0))
		}
	}
}

func TestANodeThatHearsNobodyAccusesNoOne(t *testing.T) {
	c := newTestCore(t, "a:1")
	peers := []Member{peer("b:1"), peer("c:1"), peer("d:1")}
	for _, p := range peers {
		befriend(c, p)
	}
	sawUnhealthy := false
	for now := t0; now.Sub(t0) < 20*fast.SuspectAfter; now = now.Add(fast.Heartbeat / 4) {
		c.Tick(now)
		for _, e := range c.Ready().Events {
			if e.Kind == EventLocalHealth && !e.Healthy {
				sawUnhealthy = true
			}
		}
	}
	for _, p := range peers {
		if st := statusIn(c, p.ID); st == StatusDead {
			t.Errorf("expected an isolated node never to declare %v dead; got %v", p.ID, st)
		}
	}
	if !sawUnhealthy || c.Healthy() {
		t.Fatal("expected a node that hears nobody to report itself unhealthy")
	}
	if c.Owning() {
		t.Fatal("expected a node that hears nobody to step down")
	}
}

func TestALateTickSilencesAccusationsForSuspectAfter(t *testing.T) {
	c := newTestCore(t, "a:1")
	b, d := peer("b:1"), peer("d:1")
	befriend(c, b)
	befriend(c, d)
	c.Tick(t0)
	c.Step(Message{Type: MsgAck, From: b.ID})
	// The node's own loop stalls for 3×SuspectAfter; then the first thing
	// it does is tick.
	late := t0.Add(3 * fast.SuspectAfter)
	c.Tick(late)
	if c.Healthy() {
		t.Fatal("expected a late tick to make the node doubt itself")
	}
	for now := late; now.Before(late.Add(fast.SuspectAfter)); now = now.Add(fast.Heartbeat / 4) {
		c.Tick(now)
		if st := statusIn(c, b.ID); st != StatusAlive {
			t.Fatalf("expected no accusation within SuspectAfter of a late tick; %v became %v", b.ID, st)
		}
	}
}

func TestMessagesForAnotherProcessIncarnationAreDropped(t *testing.T) {
	c := newTestCore(t, "a:1")
	b := peer("b:1")
	stale := ring.NodeID{Addr: "a:1", Incarnation: 0}
	c.Step(Message{Type: MsgGossip, From: b.ID, To: stale, Records: []Member{b}})
	if _, ok := c.Member(b.ID); ok {
		t.Fatal("expected a message addressed to an earlier process at this address to be ignored")
	}
}

func TestRefutationRaisesOwnIncarnationAboveTheVerdict(t *testing.T) {
	c := newTestCore(t, "a:1")
	b := peer("b:1")
	verdict := c.Self()
	verdict.Incarnation = 4
	verdict.Status = StatusDead
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{b, verdict}})
	if got := c.Self(); got.Incarnation != 5 || got.Status != StatusAlive {
		t.Fatalf("expected alive@5 after refuting dead@4; got %v", got)
	}
	var refuted bool
	for _, e := range c.Ready().Events {
		refuted = refuted || e.Kind == EventRefuted
	}
	if !refuted {
		t.Fatal("expected an EventRefuted")
	}
}

func TestANewerProcessAtOurAddressRemovesUs(t *testing.T) {
	c := newTestCore(t, "a:1")
	b := peer("b:1")
	newer := Member{ID: ring.NodeID{Addr: "a:1", Incarnation: 2}, Status: StatusAlive}
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{b, newer}})
	if !c.Removed() || c.Owning() {
		t.Fatal("expected the older process to be removed and own nothing once a newer one is known at its address")
	}
	if err := c.StartLeave(); !errors.Is(err, ErrRemoved) {
		t.Fatalf("expected ErrRemoved; got %v", err)
	}
}

func TestStepDownAfterHalfDeadAfterAndResume(t *testing.T) {
	c := newTestCore(t, "a:1")
	peers := []Member{peer("b:1"), peer("c:1")}
	for _, p := range peers {
		c.Step(Message{Type: MsgGossip, From: peers[0].ID, Records: []Member{p}})
	}
	c.Tick(t0)
	if !c.Owning() {
		t.Fatal("expected to own with 3 of 3 alive")
	}
	// Both others become suspect by gossip: 1 of 3 is no majority.
	lost := t0.Add(fast.Heartbeat)
	c.Tick(lost)
	for _, p := range peers {
		p.Status = StatusSuspect
		c.Step(Message{Type: MsgGossip, From: peers[0].ID, Records: []Member{p}})
	}
	var downAt time.Time
	for now := lost; now.Before(lost.Add(fast.DeadAfter)); now = now.Add(fast.Heartbeat / 4) {
		c.Tick(now)
		c.Step(Message{Type: MsgAck, From: peers[0].ID}) // still hearing somebody
		if !c.Owning() && downAt.IsZero() {
			downAt = now
		}
	}
	if got := downAt.Sub(lost); got < fast.DeadAfter/2 || got > fast.DeadAfter/2+fast.Heartbeat/4 {
		t.Fatalf("expected step-down DeadAfter/2 = %v after losing the majority; got %v", fast.DeadAfter/2, got)
	}
	// c refutes and is heard again. (A refutation gossiped by another
	// member alone does not do: a member this node watches counts against
	// its majority while silent to it, see silentWatched.)
	refuted := peers[1]
	refuted.Incarnation = 1
	c.Step(Message{Type: MsgGossip, From: peers[0].ID, Records: []Member{refuted}})
	c.Step(Message{Type: MsgAck, From: refuted.ID})
	if !c.Owning() {
		t.Fatal("expected ownership to resume as soon as a majority (2 of 3) is seen again")
	}
}

func TestGossipIsSentAtMostTheRetransmitLimit(t *testing.T) {
	q := newBroadcasts()
	q.queue(peer("b:1"), 1)
	limit := retransmitLimit(2, 100) // 2*ceil(log2(101)) = 14
	if limit != 14 {
		t.Fatalf("expected lambda*ceil(log2(N+1)) = 14 for N=100, lambda=2; got %d", limit)
	}
	sent := 0
	for range 100 {
		sent += len(q.pick(8, limit))
	}
	if sent != limit {
		t.Fatalf("expected the record to be sent exactly %d times; got %d", limit, sent)
	}
}

func TestPlanChangesOneMemberPerStepJoinersFirst(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from := rapid.SliceOfNDistinct(genID(), 0, 6, func(id ring.NodeID) ring.NodeID { return id }).Draw(t, "from")
		to := rapid.SliceOfNDistinct(genID(), 0, 6, func(id ring.NodeID) ring.NodeID { return id }).Draw(t, "to")
		plan := PlanChanges(from, to)
		again := PlanChanges(rapid.Permutation(from).Draw(t, "from2"), rapid.Permutation(to).Draw(t, "to2"))
		if !slices.EqualFunc(plan, again, func(a, b []ring.NodeID) bool { return slices.Equal(a, b) }) {
			t.Fatalf("expected one plan whatever the input order; got %v and %v", plan, again)
		}
		prev := sortedIDs(from)
		shrinking := false
		for i, step := range plan {
			if !slices.IsSortedFunc(step, ring.NodeID.Compare) {
				t.Fatalf("expected step %d sorted; got %v", i, step)
			}
			switch len(step) - len(prev) {
			case 1:
				if shrinking {
					t.Fatalf("expected every join before any departure; step %d joins after a departure", i)
				}
			case -1:
				shrinking = true
			default:
				t.Fatalf("expected exactly one member changed per step; step %d goes from %v to %v", i, prev, step)
			}
			prev = step
		}
		if want := sortedIDs(to); !slices.Equal(prev, want) && !(len(prev) == 0 && len(want) == 0) {
			t.Fatalf("expected the plan to end at the target %v; ends at %v", want, prev)
		}
	})
}

func TestReadyReportsTheMemberSetWhenItChanges(t *testing.T) {
	c := newTestCore(t, "a:1")
	if r := c.Ready(); len(r.MemberSet) != 1 {
		t.Fatalf("expected the first Ready to carry the initial member set; got %v", r.MemberSet)
	}
	if r := c.Ready(); r.MemberSet != nil {
		t.Fatalf("expected no member set when nothing changed; got %v", r.MemberSet)
	}
	b := peer("b:1")
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{b}})
	if r := c.Ready(); len(r.MemberSet) != 2 {
		t.Fatalf("expected the member set to grow to 2; got %v", r.MemberSet)
	}
}

func TestReadyListsEachChangedRecordOnceWithItsLatestValue(t *testing.T) {
	c := newTestCore(t, "a:1")
	c.Ready()
	b := peer("b:1")
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{b}})
	accused := b
	accused.Status = StatusSuspect
	accused.Accusers = []string{"c:1"}
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{accused}})
	more := accused
	more.Accusers = []string{"d:1"}
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{more}}) // accusers only: no event
	r := c.Ready()
	if len(r.Changed) != 1 || r.Changed[0].Status != StatusSuspect || len(r.Changed[0].Accusers) != 2 {
		t.Fatalf("expected one changed record, b suspect with two accusers; got %v", r.Changed)
	}
	if r := c.Ready(); len(r.Changed) != 0 {
		t.Fatalf("expected no changed records in the next Ready; got %v", r.Changed)
	}
}

func TestJoiningIsReported(t *testing.T) {
	cfg := cluster.FastConfig("a:1")
	cfg.Seeds = []string{"b:1"}
	c, err := NewCore(cfg, 1, t0)
	if err != nil {
		t.Fatal(err)
	}
	c.Tick(t0)
	if r := c.Ready(); len(r.Messages) != 1 || r.Messages[0].Msg.Type != MsgJoin {
		t.Fatalf("expected one join to the seed; got %+v", r.Messages)
	}
	b := peer("b:1")
	c.Step(Message{Type: MsgJoinReply, From: b.ID, Records: []Member{b}})
	var joined bool
	for _, e := range c.Ready().Events {
		joined = joined || e.Kind == EventJoined
	}
	if !joined || !c.Joined() {
		t.Fatal("expected an EventJoined once the seed answered")
	}
}

// A node that doubts itself stretches its suspicions (1 + health), but not
// its step-down: when most of the members it watches fall silent, it must
// step down before peers that do not doubt themselves can declare it dead
// (SuspectAfter + DeadAfter after the silence began).
func TestStepDownIsNotStretchedByLocalHealth(t *testing.T) {
	c := newTestCore(t, "a:1")
	peers := []Member{peer("b:1"), peer("c:1"), peer("d:1"), peer("e:1")}
	for _, p := range peers {
		befriend(c, p)
	}
	c.Tick(t0)
	if !c.Owning() {
		t.Fatal("expected to own with 5 of 5 alive")
	}
	c.health = maxHealth
	var downAt time.Time
	end := t0.Add(2 * (fast.SuspectAfter + fast.DeadAfter))
	for now := t0.Add(fast.Heartbeat / 4); now.Before(end); now = now.Add(fast.Heartbeat / 4) {
		c.health = maxHealth // doubting itself throughout
		c.Tick(now)
		c.Step(Message{Type: MsgAck, From: peers[0].ID}) // b still heard; c, d, e silent
		if !c.Owning() && downAt.IsZero() {
			downAt = now
		}
	}
	if downAt.IsZero() {
		t.Fatalf("expected a step-down with 2 of 5 heard; still owning after %v", end.Sub(t0))
	}
	if limit := fast.SuspectAfter + fast.DeadAfter; downAt.Sub(t0) >= limit {
		t.Fatalf("stepped down %v after the silence began; peers may declare this node dead after %v", downAt.Sub(t0), limit)
	}
	// Heard again: owning again.
	for _, p := range peers[1:] {
		c.Step(Message{Type: MsgAck, From: p.ID})
	}
	c.Tick(end.Add(fast.Heartbeat))
	if !c.Owning() {
		t.Fatal("expected ownership to resume once the members are heard again")
	}
}

func TestCountsTallyThisNodesSuspicionsDeathsAndRefutations(t *testing.T) {
	c := newTestCore(t, "a:1")
	b := peer("b:1")
	befriend(c, b)
	for now := t0; statusIn(c, b.ID) != StatusDead && now.Sub(t0) < 10*(fast.SuspectAfter+fast.DeadAfter); now = now.Add(fast.Heartbeat / 4) {
		c.Heard("x:1", now) // bytes from somewhere: a node that hears nobody accuses no one
		c.Tick(now)
		c.Ready()
	}
	if st := statusIn(c, b.ID); st != StatusDead {
		t.Fatalf("expected a silent neighbour to be declared dead; it is %v", st)
	}
	if got, want := c.Counts(), (Counts{Suspicions: 1, Deaths: 1}); got != want {
		t.Fatalf("Counts after suspecting and declaring one silent neighbour dead = %+v, want %+v", got, want)
	}
	verdict := c.Self()
	verdict.Status = StatusSuspect
	c.Step(Message{Type: MsgGossip, From: b.ID, Records: []Member{verdict}})
	if got := c.Counts().Refutations; got != 1 {
		t.Fatalf("Counts().Refutations after refuting one suspicion = %d, want 1", got)
	}
}
