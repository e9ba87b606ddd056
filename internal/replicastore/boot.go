package replicastore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/dgraph-io/badger/v4"
)

// bootIDFile names the running kernel's boot: a random id Linux draws
// at every boot (see random(4)).
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// bootID returns the running kernel's boot id, or nil where there is none
// to read (another system): a store then treats every stop without Close
// as a possible power loss.
func bootID() []byte {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return nil
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 64 {
		return nil
	}
	return b
}

// bootMarker is the clean-stop marker of a run without Sync on the boot
// with the given id: what its Puts returned, the kernel held, so a stop
// without Close on the same boot (the process killed) lost nothing; only
// a new boot (a power loss, a crash of the machine) may have.
func bootMarker(id []byte) []byte {
	return append([]byte(bootPrefix), id...)
}

const bootPrefix = "boot "

// keptOnThisBoot reports whether marker is the boot marker of the
// running boot (boot, nil when unknown).
func keptOnThisBoot(marker, boot []byte) bool {
	id, ok := bytes.CutPrefix(marker, []byte(bootPrefix))
	return ok && len(boot) > 0 && bytes.Equal(id, boot)
}

// PowerLoss leaves the stopped store under dir as a restart of the
// machine would find it: if its last run was without Sync and stopped
// without Close, nothing says any more that the kernel kept what it
// wrote, and the next Open reports it unclean. A store closed cleanly, or
// last run with Sync, lost nothing to a power loss and is left as it is.
// It is for tests of the recovery from such a loss: a store's directory
// copied while it runs is what a power loss leaves at best.
func PowerLoss(dir string) error {
	db, err := badger.Open(badgerOptions(dir, false, slog.New(slog.DiscardHandler)))
	if err != nil {
		return fmt.Errorf("troupe: open store %s: %w", dir, err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(cleanKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(v, []byte(bootPrefix)) {
			return nil
		}
		return txn.Delete(cleanKey)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}
