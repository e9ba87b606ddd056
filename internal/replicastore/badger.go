package replicastore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

// Options configures a Badger store.
type Options struct {
	// Sync makes Put return only once its records are on disk. The Puts
	// waiting at one moment are written as one transaction with one fsync
	// (group commit), so concurrent Puts share the cost. Without Sync, Put
	// returns once the operating system holds the records: they survive
	// the process being killed, not a power loss.
	Sync bool
	// Logger receives the store's messages and badger's own. Nil logs
	// nothing.
	Logger *slog.Logger

	// boot replaces the running boot's id (bootID), for tests: nil reads
	// it, empty stands for a boot that cannot be read.
	boot []byte
}

// Badger is a Store in a badger database under one directory.
type Badger struct {
	db    *badger.DB
	dir   string
	sync  bool
	group groupCommit
	// unclean: the store had been opened before, and at Open held no
	// clean-stop marker and no boot record of the running boot.
	unclean bool
	// boot is the running boot's id; nil where unknown.
	boot []byte
	// afterKill: the previous run was killed on this boot, and Open made
	// its files durable.
	afterKill bool
	log       *slog.Logger
	// format is the store's on-disk format version (see format.go);
	// upgrading is held while a write moves it forward.
	format    atomic.Uint32
	upgrading sync.Mutex
	// receivingSyncs counts the receiving records synced (tests).
	receivingSyncs atomic.Int64
}

var _ Store = (*Badger)(nil)

// Open opens (or creates) the store under dir, in the newest format; a
// store of an older format (4 or 5) is opened as it is and moves to 5
// when it first records floors, to 6 when it first stores a horizon. A store written in a newer
// on-disk format is refused with a *replication.FormatError (matching
// replication.ErrNewerFormat) and left as it is; a store whose format
// record is missing or damaged is refused with replication.ErrCorrupt.
func Open(dir string, opts Options) (*Badger, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db, err := badger.Open(badgerOptions(dir, opts.Sync, logger))
	if err != nil {
		return nil, fmt.Errorf("troupe: open store %s: %w", dir, err)
	}
	s := &Badger{db: db, dir: dir, sync: opts.Sync, boot: opts.boot, log: logger}
	if s.boot == nil {
		s.boot = bootID()
	}
	existed, err := s.checkFormat()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.checkStop(existed); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("troupe: open store %s: %w", dir, err)
	}
	return s, nil
}

// badgerOptions are the options of a store's database.
func badgerOptions(dir string, sync bool, logger *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(sync).
		WithLogger(slogAdapter{logger.With("component", "badger", "dir", dir)}).
		// Records are small: keep them in the LSM tree, and keep the
		// memory a node reserves for its store modest.
		WithMemTableSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithBlockCacheSize(16 << 20).
		WithNumCompactors(2)
}

// Unclean reports whether this Open found that the store may have lost
// acknowledged writes: it had been opened before, and its previous run
// stopped without Close while it ran without Sync, and either on another
// boot of the machine (a power loss or a crash of the kernel may have
// taken its last writes and promises, or all of them) or where the boot
// is unknown. A run killed on the running boot lost nothing (its Puts
// returned once the kernel held their records), once Open made what it
// wrote durable (see checkStop). An unclean Open recorded the whole ring
// as receiving (see Receiving), durably, so the loss stays known after
// later stops, clean or not, until the driver records that it caught up.
func (s *Badger) Unclean() bool { return s.unclean }

// checkStop reads the clean-stop marker and the boot record and arms
// them for this run: without Sync the marker is removed and the boot
// record names the running boot (or is removed where the boot is
// unknown), durably, so that a stop without Close leaves no marker and a
// boot record only this boot accepts; with Sync the marker is kept
// (written if missing), since every Put of this run returns after an
// fsync and a crash loses nothing acknowledged.
//
// A store opened before (existed) without a marker stopped without Close
// while it ran without Sync. If its boot record names the running boot,
// the process was killed and the kernel holds what it wrote; every file
// of the store is then fsynced before anything is written, so that a
// power loss from now on cannot take what this run takes as kept (a
// failure of that makes the store unclean). Otherwise it may have lost
// acknowledged writes: the whole ring is recorded as receiving in the
// same transaction that arms the marker, so that a later clean stop does
// not hide the loss.
func (s *Badger) checkStop(existed bool) error {
	var clean, killed bool
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(cleanKey)
		switch {
		case err == nil:
			clean = true
			return nil
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		item, err := txn.Get(bootKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			return nil
		case err != nil:
			return err
		}
		id, err := item.ValueCopy(nil)
		killed = err == nil && len(s.boot) > 0 && bytes.Equal(id, s.boot)
		return err
	})
	if err != nil {
		return err
	}
	if existed && !clean && killed {
		if err := syncFiles(s.dir); err != nil {
			s.log.Warn("troupe: the store's files could not be made durable after the process was killed: it counts as stopped uncleanly", "err", err)
			killed = false
		}
		s.afterKill = killed
		if killed {
			s.log.Info("troupe: the store's last run stopped without Close on this boot of the machine: the kernel kept what it wrote, now synced to disk, so nothing acknowledged was lost")
		}
	}
	s.unclean = existed && !clean && !killed
	err = s.db.Update(func(txn *badger.Txn) error {
		if s.unclean {
			if err := txn.Set(receivingKey, encodeReceiving([]ring.Range{{}})); err != nil {
				return err
			}
		}
		if s.sync || len(s.boot) == 0 {
			if err := txn.Delete(bootKey); err != nil {
				return err
			}
		} else if err := txn.Set(bootKey, s.boot); err != nil {
			return err
		}
		if s.sync {
			return txn.Set(cleanKey, []byte("sync"))
		}
		return txn.Delete(cleanKey)
	})
	if err != nil {
		return err
	}
	// The marker's removal, the boot record and the receiving record must
	// be on disk before anything is acknowledged, or a power loss could
	// bring the marker back or lose the record.
	return s.db.Sync()
}

// checkFormat reads the format record, writing it into a new store, and
// reports whether it existed. The version only moves forward: a store of
// a version this binary does not read is refused and left as it is.
func (s *Badger) checkFormat() (existed bool, err error) {
	err = s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false})
			it.Rewind()
			empty := !it.Valid()
			it.Close()
			if !empty {
				return fmt.Errorf("%w: store %s has records but no format record", replication.ErrCorrupt, s.dir)
			}
			s.format.Store(formatVersion)
			return txn.Set(formatKey, encodeFormat(formatVersion))
		}
		if err != nil {
			return err
		}
		existed = true
		b, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		v, err := decodeFormat(b)
		if err != nil {
			return fmt.Errorf("store %s: %w", s.dir, err)
		}
		if v == 0 {
			return fmt.Errorf("%w: store %s has format 0", replication.ErrCorrupt, s.dir)
		}
		if v < oldestFormat || v > formatVersion {
			return &replication.FormatError{Dir: s.dir, Found: v, Oldest: oldestFormat, Supported: formatVersion}
		}
		s.format.Store(v)
		return nil
	})
	return existed, err
}

// Receiving implements Store.
func (s *Badger) Receiving(ctx context.Context) ([]ring.Range, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	var ranges []ring.Range
	var recorded bool
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(receivingKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		recorded = true
		return item.Value(func(v []byte) error {
			ranges, err = decodeReceiving(v)
			return err
		})
	})
	return ranges, recorded, s.wrap(err)
}

// SetReceiving implements Store: the record is written, and synced to
// disk before it returns, with or without Sync, unless it only removes
// ranges from the one it replaces. A join ends hundreds of ranges one at
// a time; syncing each (an msync of badger's log, on the replication
// loop) took about an eighth of the joining member's CPU.
func (s *Badger) SetReceiving(ctx context.Context, ranges []ring.Range) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	shrinks := false
	err := s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(receivingKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := item.Value(func(v []byte) error {
				old, err := decodeReceiving(v)
				shrinks = err == nil && onlyRemoves(old, ranges) // a damaged record is replaced, and synced
				return nil
			}); err != nil {
				return err
			}
		}
		return txn.Set(receivingKey, encodeReceiving(ranges))
	})
	if err == nil && !shrinks {
		s.receivingSyncs.Add(1)
		err = s.db.Sync()
	}
	return s.wrap(err)
}

// onlyRemoves reports whether the ranges to hold no token old does not.
func onlyRemoves(old, to []ring.Range) bool { return len(replica.Subtract(to, old...)) == 0 }

// Floors implements Store.
func (s *Badger) Floors(ctx context.Context) ([]replica.Floor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var floors []replica.Floor
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(floorsKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		// The layout is the format's, read in the same transaction as
		// the record that an upgrade writes with it.
		f, err := txn.Get(formatKey)
		if err != nil {
			return err
		}
		fb, err := f.ValueCopy(nil)
		if err != nil {
			return err
		}
		format, err := decodeFormat(fb)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			floors, err = decodeFloors(v, format)
			return err
		})
	})
	return floors, s.wrap(err)
}

// SetFloors implements Store: the record is written and synced to disk
// before it returns, with or without Sync. A store of format 4 becomes
// format 5 in the same transaction, and one older than 7 becomes 7 when
// a floor names a departure, so a binary that would ignore or misread the
// floors no longer opens it.
func (s *Badger) SetFloors(ctx context.Context, floors []replica.Floor) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// One change of format at a time (see write): it only moves forward.
	s.upgrading.Lock()
	defer s.upgrading.Unlock()
	from := s.format.Load()
	to := max(from, floorsLayout(from, floors))
	err := s.db.Update(func(txn *badger.Txn) error {
		if to != from {
			if err := txn.Set(formatKey, encodeFormat(to)); err != nil {
				return err
			}
		}
		return txn.Set(floorsKey, encodeFloors(floors, to))
	})
	if err == nil {
		err = s.db.Sync()
	}
	if err == nil && to != from {
		s.format.Store(to)
	}
	return s.wrap(err)
}

func (s *Badger) wrap(err error) error {
	if errors.Is(err, badger.ErrDBClosed) {
		return replication.ErrClosed
	}
	return err
}

// Get implements Store.
func (s *Badger) Get(ctx context.Context, key replica.Key, slot replica.Slot) (replica.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return replica.Record{}, false, err
	}
	var rec replica.Record
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		bkey := appendKey(nil, key, slot)
		item, err := txn.Get(bkey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			rec, err = decodeValue(bkey, key, slot, v)
			found = err == nil
			return err
		})
	})
	return rec, found, s.wrap(err)
}

// Held implements Store: one iterator seeks each record's key (the
// records a catch-up compares come in ring order, as the keys are
// sorted), which reads a value where it lies instead of copying it as a
// Get does.
func (s *Badger) Held(ctx context.Context, recs []replica.Record, fn func(int, replica.Record, bool)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte{recordPrefix}})
		defer it.Close()
		var bkey []byte
		for i, r := range recs {
			if err := ctx.Err(); err != nil {
				return err
			}
			slot := r.Slot()
			bkey = appendKey(bkey[:0], r.Key, slot)
			it.Seek(bkey)
			if !it.Valid() || !bytes.Equal(it.Item().Key(), bkey) {
				fn(i, replica.Record{}, false)
				continue
			}
			var held replica.Record
			if err := it.Item().Value(func(v []byte) error {
				var err error
				held, err = decodeHead(bkey, r.Key, slot, v)
				return err
			}); err != nil {
				return err
			}
			fn(i, held, true)
		}
		return nil
	})
	return s.wrap(err)
}

// Put implements Store, in one transaction when the records fit badger's
// transaction limit, otherwise in several, in order, all committed
// before Put returns. Several are not atomic as a whole, which is fine:
// the driver sends nothing and answers nobody before Put returns, and a
// crash midway leaves a prefix of the records (a replica's promise before
// the record it covers), the state the replica would hold had the rest
// of its input been lost. With Sync, the Puts waiting at one moment are
// written together (see commit).
func (s *Badger) Put(ctx context.Context, recs ...replica.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.sync {
		return s.wrap(s.group.commit(recs, s.write))
	}
	return s.wrap(s.write(recs))
}

func (s *Badger) write(recs []replica.Record) error {
	// As db.Update does: a closed database would only say that writes
	// are blocked.
	if s.db.IsClosed() {
		return badger.ErrDBClosed
	}
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	// A horizon needs format 6: the first one moves the store there in
	// its transaction, so a binary that would ignore it no longer opens
	// the store.
	upgrade := s.format.Load() < horizonFormat && slices.ContainsFunc(recs, func(r replica.Record) bool {
		return r.Kind == replica.KindPromise && r.Value != nil
	})
	if upgrade {
		// One change of format at a time: a concurrent SetFloors's must
		// not be overwritten by an older version.
		s.upgrading.Lock()
		defer s.upgrading.Unlock()
		upgrade = s.format.Load() < horizonFormat
	}
	if upgrade {
		if err := txn.Set(formatKey, encodeFormat(horizonFormat)); err != nil {
			return err
		}
	}
	for _, r := range recs {
		k := appendKey(nil, r.Key, r.Slot())
		set := func() error {
			if r.Erases() {
				return txn.Delete(k)
			}
			return txn.Set(k, encodeValue(k, r))
		}
		err := set()
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return err
			}
			txn = s.db.NewTransaction(true)
			err = set()
		}
		if err != nil {
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	if upgrade {
		s.format.Store(horizonFormat)
	}
	return nil
}

// Range implements Store.
func (s *Badger) Range(ctx context.Context, g ring.Range, fn func(replica.Record) bool) error {
	// The arc as one or two spans of tokens, each [lo, hi] with lo
	// excluded when it is the arc's Start.
	type span struct {
		lo, hi  ring.Token
		exclude bool
	}
	spans := []span{{g.Start, g.End, true}}
	if g.Start >= g.End {
		spans = []span{{g.Start, math.MaxUint64, true}, {0, g.End, false}}
	}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte{recordPrefix}})
		defer it.Close()
		for _, sp := range spans {
			for it.Seek(tokenKey(sp.lo)); it.Valid(); it.Next() {
				if err := ctx.Err(); err != nil {
					return err
				}
				item := it.Item()
				k := item.Key()
				key, slot, err := decodeKey(k)
				if err != nil {
					return err
				}
				t := key.Token()
				if t > sp.hi {
					break
				}
				if sp.exclude && t == sp.lo {
					continue
				}
				var rec replica.Record
				if err := item.Value(func(v []byte) error {
					rec, err = decodeValue(k, key, slot, v)
					return err
				}); err != nil {
					return err
				}
				if !fn(rec) {
					return nil
				}
			}
		}
		return nil
	})
	return s.wrap(err)
}

// Close implements Store. It writes the clean-stop marker after
// everything before it is on disk, so that the next Open knows nothing
// acknowledged was lost.
func (s *Badger) Close() error {
	if s.db.IsClosed() {
		return s.wrap(s.db.Close())
	}
	err := s.db.Sync()
	if err == nil {
		err = s.db.Update(func(txn *badger.Txn) error { return txn.Set(cleanKey, []byte("clean")) })
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return s.wrap(err)
}

// slogAdapter passes badger's messages to a slog.Logger.
type slogAdapter struct{ l *slog.Logger }

func msg(format string, args []any) string {
	return strings.TrimSpace(fmt.Sprintf(format, args...))
}

func (a slogAdapter) Errorf(f string, args ...any)   { a.l.Error(msg(f, args)) }
func (a slogAdapter) Warningf(f string, args ...any) { a.l.Warn(msg(f, args)) }
func (a slogAdapter) Infof(f string, args ...any)    { a.l.Info(msg(f, args)) }
func (a slogAdapter) Debugf(f string, args ...any)   { a.l.Debug(msg(f, args)) }
