package ring_test

import (
	"fmt"

	"github.com/troupe-go/troupe/ring"
)

func members() []ring.NodeID {
	return []ring.NodeID{
		{Addr: "10.0.0.4:7400", Incarnation: 1},
		{Addr: "10.0.0.5:7400", Incarnation: 1},
		{Addr: "10.0.0.6:7400", Incarnation: 1},
	}
}

// A key's token is computed once, when its ref is made; each message is then
// routed by token.
func ExampleRing_Owner() {
	r := ring.New(members())
	tok := ring.KeyToken("counter", "page-views")

	replicas := r.AppendReplicas(nil, tok, 2)
	fmt.Println("replicas:", replicas)

	primary := replicas[0]
	live := func(m ring.NodeID) bool { return m != primary } // the primary is dead
	owner, err := r.Owner(tok, 2, live)
	fmt.Println("owner with the primary dead:", owner, err)

	live = func(ring.NodeID) bool { return false }
	_, err = r.Owner(tok, 2, live)
	fmt.Println("every replica dead:", err)
	// Output:
	// replicas: [10.0.0.4:7400#1 10.0.0.5:7400#1]
	// owner with the primary dead: 10.0.0.5:7400#1 <nil>
	// every replica dead: troupe: no replica of the key is alive or suspect
}

// A member joins: the ring before stays queryable while the moved ranges are
// handed over.
func ExamplePlacement() {
	ms := members()
	joiner := ring.NodeID{Addr: "10.0.0.7:7400", Incarnation: 1}
	p := ring.NewPlacement(ring.New(ms))
	p = p.Next(p.Current().With(joiner))

	moves := p.Moves(1)
	fmt.Println("ranges moving to the joiner:", len(moves))
	tok := moves[0].Range.End
	before, _ := p.Serving(tok, 1, nil)
	for _, mv := range moves {
		p = p.Received(mv.Range)
	}
	after, _ := p.Serving(tok, 1, nil)
	fmt.Println("served by", before, "then by", after)
	p = p.Settled()
	fmt.Println("in handoff:", p.InHandoff())
	// Output:
	// ranges moving to the joiner: 92
	// served by 10.0.0.6:7400#1 then by 10.0.0.7:7400#1
	// in handoff: false
}

// A Client compares versions to learn that its ring is stale.
func ExampleRing_Version() {
	cached := ring.New(members())
	reported := ring.New(append(members(), ring.NodeID{Addr: "10.0.0.7:7400", Incarnation: 1}))
	fmt.Println("current:", cached.Version() == reported.Version())
	// Output:
	// current: false
}
