// Package replication configures how Troupe keeps copies of actor state.
// Users choose a level per actor type with actor.WithReplicas (WriteOne,
// WriteMajority and WriteAll are [One], [Majority] and [All]) and the
// storage per system with system.Config's DataDir and Sync, which make a
// [Config].
//
// # Levels
//
// An actor type with replicas keeps n copies of each key's state, the
// owner's included, on the first n distinct members clockwise from the key
// on the ring. A state change counts as written once the replicas its
// [Level] asks for have stored it: [One] (the owner alone), [Majority] (the
// default: more than half of the n replicas) or [All]. The majority is
// counted over the replica set as placed on the full ring, so a member that
// is down still counts in the denominator until membership removes it: two
// sides of a partition can never both reach a majority.
//
// A reply or an outgoing message that follows a state change leaves the
// owner only once that change has met its level. A new owner first fences
// the previous one (it raises the key's ownership epoch on the replicas)
// and adopts the newest state it finds, so a paused owner that wakes up
// after another took over gets neither a write acknowledged nor a stale
// read answered.
//
// # Storage
//
// [Config] says where a node keeps its copies. Without a DataDir they live
// in memory and are lost when the process ends (other replicas still hold
// them). With a DataDir they live in a store under that directory that a
// restarted process at the same address opens again. The store carries an
// on-disk format version that only moves forward: a binary that finds a
// newer format refuses to open it ([ErrNewerFormat]), as does one that
// finds an unreleased older format ([ErrOlderFormat]); a record that fails
// its checksum is reported ([ErrCorrupt]), never silently reset.
//
// Without Sync a write is in the operating system's page cache when it is
// acknowledged: it survives the process being killed, not the machine
// losing power, and a power loss on any one replica may lose acknowledged
// writes at every level (the replica counts again without them). With
// Sync every acknowledgement waits for an fsync, which concurrent writes
// share (group commit), so an acknowledged write also survives a power
// loss of the whole cluster.
package replication
