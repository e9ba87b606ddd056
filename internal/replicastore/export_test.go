package replicastore

import "testing"

// crash closes b's database the way a killed process leaves it: without
// the clean-stop marker that Close writes, on the same boot.
func crash(b *Badger) error { return b.db.Close() }

// powerLoss stops b as a power loss does: crashed, and then on another
// boot of the machine.
func powerLoss(t *testing.T, b *Badger) {
	t.Helper()
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	if err := PowerLoss(b.dir); err != nil {
		t.Fatal(err)
	}
}

// unknownBoot is Options.boot where the running boot cannot be read.
var unknownBoot = []byte{}

// receivingSynced is how many receiving records b synced.
func receivingSynced(b *Badger) int64 { return b.receivingSyncs.Load() }
