// Package testhook lets the tests of other packages reach behaviour a
// package keeps unexported, without an import cycle: the owning package
// sets the hook in its init.
package testhook

// Crash stops a *system.System as a killed process would: no leave, no
// goodbye. Set by package system.
var Crash func(sys any)

// Rejoin makes a clustered *system.System rejoin with a new incarnation
// as if the cluster had removed it. Set by package system.
var Rejoin func(sys any)
