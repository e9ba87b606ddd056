package replicastore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

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

// syncFiles fsyncs every regular file under dir, then dir itself: what a
// killed process wrote, which the kernel holds, reaches the disk. (badger
// syncs only its current log at DB.Sync, and the logs of the run before
// are written back by the kernel whenever it chooses.)
func syncFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		errs = append(errs, syncPath(filepath.Join(dir, e.Name())))
	}
	errs = append(errs, syncPath(dir))
	return errors.Join(errs...)
}

// syncPath fsyncs the file or directory at path. One that badger removed
// meanwhile needs none: it removes a log once what it held is in a table
// it synced.
func syncPath(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// PowerLoss leaves the stopped store under dir as a restart of the
// machine would find it: if its last run was without Sync and stopped
// without Close, nothing says any more that the kernel kept what it
// wrote (its boot record is removed), and the next Open reports it
// unclean. A store closed cleanly, or last run with Sync, lost nothing
// to a power loss and opens clean as before. It is for tests of the
// recovery from such a loss: a store's directory copied while it runs is
// what a power loss leaves at best.
func PowerLoss(dir string) error {
	db, err := badger.Open(badgerOptions(dir, false, slog.New(slog.DiscardHandler)))
	if err != nil {
		return fmt.Errorf("troupe: open store %s: %w", dir, err)
	}
	err = db.Update(func(txn *badger.Txn) error { return txn.Delete(bootKey) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// CopyAfterPowerLoss copies the directory of a store, running or not,
// into to and applies PowerLoss to the copy: what a power loss would
// leave of the store at best. It is for tests. Runs of zero bytes stay
// holes: Badger sizes its log and memtable files ahead of their use
// (sparse files of hundreds of MB), and a plain copy wrote them whole.
func CopyAfterPowerLoss(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		err := copySparse(filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // gone since it was listed (a flush, a compaction): the store runs
		}
		if err != nil {
			return err
		}
	}
	return PowerLoss(to)
}

// copySparse copies the regular file from to the new file to, leaving a
// hole where a whole block of from reads as zeros.
func copySparse(from, to string) (err error) {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
	}()
	buf, zeros := make([]byte, 64<<10), make([]byte, 64<<10)
	var size int64
	for {
		n, rerr := io.ReadFull(src, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zeros[:n]) {
				if _, err := dst.Seek(int64(n), io.SeekCurrent); err != nil {
					return err
				}
			} else if _, err := dst.Write(buf[:n]); err != nil {
				return err
			}
			size += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	// A file that ends in a hole gets its length from the truncate.
	return dst.Truncate(size)
}
