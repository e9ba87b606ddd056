// Package replica is the deterministic core of state replication: the
// rules by which an owner raises a key's ownership epoch on the key's
// replica set, adopts the newest state, writes changes to the level its
// type asks for and answers reads only after checking it still holds the
// epoch; and the rules by which a replica promises, accepts and refuses.
//
// # Driving the core
//
// The core has no goroutines, clock, sockets or randomness. A driver owns
// one [Core] per node and calls it from one goroutine: [Core.Acquire],
// [Core.Write] and [Core.Read] for the owner's work, [Core.Step] for each
// received [Message] and [Core.Tick] when it wants lost messages sent
// again. After any of these it takes [Core.Ready] and must, in order:
//
//  1. store Ready.Floors (every floor, when a fence raised one) durably
//     and Ready.Persist (the replica's promises and records) durably
//     enough for its level of Sync;
//  2. send Ready.Messages;
//  3. release what waited on Ready.Done (replies, outgoing messages that
//     followed a state change) and fail Ready.Failed with an error that
//     says the outcome is unknown.
//
// A restarted node builds a new Core and gives it its stored records with
// [Core.Restore]; the owner's in-memory state is gone and its keys must be
// acquired again. A core that may lack what it acknowledged (a new or
// wiped member, a store that lost its last writes) starts [Receiving]:
// its answers do not count until the driver fed it a quorum's records
// with [Core.CatchUp] and called [Core.Received]; [Core.AddReceiving]
// adds ranges (a hand-off), and the driver must persist [Core.Receiving]
// whenever it changes, before anything that follows leaves, so that a
// restart before the catch-up still receives. After a key's replica
// set changed, [Core.AcquireWith] names the previous set, so that the
// acquisition fences it. With [Core.SetDeltaMin], a write of a large
// value goes to the replicas that hold the slot's previous record as an
// edit of it (MsgAcceptDelta), and whole to the others.
//
// # Fencing a range
//
// A hand-off's new replica fences the range it copies at its sources
// first ([MsgFence], driven by a [Fencer]): each raises the range's
// [Floor] and refuses older owners of the previous set from then on, so
// an owner whose view of membership lags gets nothing more acknowledged
// there. The driver restores floors at start with [Core.RestoreFloors].
//
// The protocol and the argument for its safety are in docs/replication.md.
package replica
