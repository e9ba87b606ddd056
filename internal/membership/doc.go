// Package membership runs Troupe's cluster membership: the protocol
// behind the records, statuses and configuration that package cluster
// exports. docs/membership.md describes the protocol in full.
//
// # Layers
//
// Core is the protocol as a deterministic state machine, in the style of
// etcd's raft: no goroutines, clock or sockets. The caller feeds it the
// time (Tick), each received Message (Step) and when bytes last arrived
// from a peer (Heard), then drains Ready, which lists what to do: the
// messages to send, the events to publish, the records that changed and
// the new member set for placement. Given the same config, seed and
// inputs it produces the same outputs. Beneath it, Table holds one record
// per NodeID and Merge combines two records about one NodeID as a join
// semilattice, so any delivery order converges.
//
// Node is the running façade: one goroutine owns the Core, ticks it,
// applies Ready through a Transport and publishes events to
// Subscriptions; its methods are safe for concurrent use. WireTransport
// carries the messages over a wire endpoint (msgpack, with a format
// version an old binary refuses); MemNetwork is a seeded, virtual-time
// network with delay, loss, partitions and paused endpoints, on which the
// scenario tests, golden scripts (testdata/scripts) and simulations run
// clusters without sleeping.
//
// # Placement
//
// Member-set changes reach placement one member per step, joiners first,
// in the order PlanChanges derives alike on every node.
package membership
