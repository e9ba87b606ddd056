package replicastore

// crash closes b's database the way a killed process leaves it: without
// the clean-stop marker that Close writes.
func crash(b *Badger) error { return b.db.Close() }
