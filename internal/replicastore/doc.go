// Package replicastore keeps a node's replicated records: the promises and
// records the replication core asks its driver to persist, and the
// ranges it still receives and its floors. [Memory] holds
// them in memory (the default, and for tests); [Badger] keeps them in a
// badger database under a directory, with an on-disk format version that
// only moves forward and a checksum on every record.
package replicastore
