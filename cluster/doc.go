// Package cluster configures and reports Troupe's membership: who is in
// the cluster, what each member is believed to be, and whether this member
// may own actors. A system joins a cluster with system.Start and a Config
// from this package; docs/membership.md describes the protocol in full.
//
// # Configuring
//
// Start from a preset and change what you need:
//
//	cfg := cluster.DefaultConfig("10.0.0.5:7400") // the address other members dial
//	cfg.ClusterName = "shop"
//	cfg.Seeds = []string{"10.0.0.1:7400", "10.0.0.2:7400"}
//
// DefaultConfig suits a network of machines (a failed member is declared
// dead after about 10 s of silence, 5 s when its port refuses);
// FastConfig suits members on one machine and tests (about 1 s, 0.5 s).
// Timings holds the heartbeat, SuspectAfter, DeadAfter,
// RemoveAfter, AntiEntropy and TombstoneTTL; the zero value of any field
// means its default, and Validate names the field it rejects. Every member
// of a cluster uses the same ClusterName, timings and TLS settings.
//
// Seeds are first contacts only: any live member will do, and a member
// that lists none starts a new cluster. A member listed among its own
// seeds asks the others for 2×SuspectAfter, then starts a new cluster
// (and says so in the log); any other member waits for a seed, up to
// JoinTimeout, then fails with a *JoinError naming each seed's last
// error, or at once with ErrJoinRefused when every seed refused it (a
// *wire.Refused says why). Members keep probing their seeds and the
// addresses of members they lost, so clusters of the same name that
// formed apart (a seed restarted without seeds, say) merge when they
// meet.
//
// # Members
//
// A member is a process lifetime, named by a ring.NodeID: the address it
// advertises and an incarnation chosen when the process starts, so a
// restarted process at the same address is a new member. A Member record
// adds its Status (alive, leaving, suspect, dead, left) and the actor
// types it hosts. A member that has not finished joining says Joining and
// gets no keys until it has its own view. system.System.Members lists
// the current members a system knows: one per address, the newest
// process there, none that left.
//
// # Failure detection
//
// Members watch a few neighbours and probe the one heard from least
// recently. A member silent for SuspectAfter is suspected; silent for
// SuspectAfter + DeadAfter and accused by enough distinct observers (two,
// fewer only when fewer exist), it is declared dead and its keys move to
// other members. A member whose connection broke and whose redial failed
// (its port refuses: the process is gone) is suspected at once, and dead
// DeadAfter later if still silent and accused by enough observers, about
// 5 s instead of 10 s with DefaultConfig. A member that hears of a
// verdict about itself refutes it. A member that hears nobody, or whose
// own clock ticks late (a paused process, a starved machine), doubts
// itself first and accuses no one.
//
// # Standing
//
// A member owns actors only while it sees a majority of the member set
// alive: more than half of the members that are not leaving are alive
// (leaving members count on neither side). After losing it, it steps
// down once DeadAfter/2 has passed and resumes as soon as it sees a
// majority again, so the minority side of a partition stops serving
// before the majority declares it dead. Only a member that sees a
// majority removes dead members, after RemoveAfter, and members still
// leaving after RemoveAfter (a leave that never completes); a member
// removed while it still runs rejoins by itself with a new incarnation.
//
// # Known gaps
//
//   - Membership is not consensus. Joins and removals are not acknowledged
//     by a majority, so in the first SuspectAfter + DeadAfter/2 of a
//     partition the minority still owns and can admit joiners.
//   - Standing is a timing argument (step-down after DeadAfter/2 against
//     the peers' SuspectAfter + DeadAfter, about 0.1 s of margin with
//     FastConfig); membership has no ownership epoch of its own (durable
//     and replicated actors are fenced by replication's epochs).
//   - A record forgotten after TombstoneTTL can come back from a member
//     that missed it for that long (it then dies again by silence).
package cluster
