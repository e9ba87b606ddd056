package replicanode

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// rawUpdate changes a store's badger database behind its back, as a newer
// binary or a damaged disk would.
func rawUpdate(t *testing.T, dir string, f func(txn *badger.Txn) error) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(f); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeFormat sets the store's format record (docs/replication.md: a
// big-endian uint32 and its CRC-32C under "\x00format") to version.
func writeFormat(t *testing.T, dir string, version uint32) {
	b := binary.BigEndian.AppendUint32(nil, version)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set([]byte("\x00format"), b) })
}

// corruptRecord flips a bit in the value of every record of the store.
func corruptRecord(t *testing.T, dir string) {
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{'r'}})
		var keys, vals [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return err
			}
			v[len(v)-1] ^= 0x40
			keys, vals = append(keys, it.Item().KeyCopy(nil)), append(vals, v)
		}
		it.Close()
		if len(keys) == 0 {
			t.Fatal("no record to corrupt")
		}
		for i := range keys {
			if err := txn.Set(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}
