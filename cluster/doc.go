// Package cluster implements Troupe's membership: who is in the cluster,
// what each member is believed to be, and whether this node may own actors.
//
// # Status
//
// Work in progress; see the end of this comment once the core lands.
package cluster
