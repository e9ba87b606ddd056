// Package placement names where a cluster's keys live with an opaque
// token, the placement version, that every process seeing the same
// placement computes alike: the admin API reports it
// (/api/v1/placement), members send it to clients, and a client compares
// it with its own to learn that its view is stale.
//
// # The token
//
// A placement version is a function of the placement-relevant set only:
// each actor type's ring membership (ring.Version, a digest of the sorted
// member set) and which ring members do not serve (dead: their keys'
// owner is the next replica). A suspicion, a join still under way, the
// accusers of a record or a new incarnation number of a member's record
// leave it as it was. Two processes that see the same set get the same
// token, whatever order their records came in.
//
// Tokens are compared for equality only, never by magnitude: a
// difference means "refresh", nothing more.
package placement
