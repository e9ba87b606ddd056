// Package lincheck is the register model the linearizability tests of
// several packages share, and the small pieces around it: a history that
// concurrent clients record into, and a drawing of a rejected history.
//
// # The model
//
// A history is read, write and compare-and-set operations on integer
// registers, one register per key, each 0 before any write. The key type
// is the caller's: a string, or a struct naming a record of a key. Model
// partitions a history by key, so porcupine checks each register alone.
//
// An operation whose client never learnt its outcome (the call failed or
// timed out) is recorded with Output.Unknown and Return set to Pending: a
// write or a compare-and-set that may have taken effect at any time after
// its call, or never. A failed read has no effect and is left out.
//
// The package is test support: only tests import it.
package lincheck
