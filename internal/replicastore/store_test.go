package replicastore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

var node = ring.NodeID{Addr: "10.0.0.1:7400", Incarnation: 3}

func rec(id string, kind replica.Kind, version uint64, value string) replica.Record {
	r := replica.Record{Key: replica.Key{Type: "counter", ID: id}, Kind: kind, Epoch: replica.Epoch{Term: 2, Node: node}, Version: version}
	if kind == replica.KindContinuity {
		r.Name = "req-1"
	}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// stores runs f on each Store implementation.
func stores(t *testing.T, f func(t *testing.T, s Store)) {
	t.Run("memory", func(t *testing.T) {
		s := NewMemory()
		defer s.Close()
		f(t, s)
	})
	t.Run("badger", func(t *testing.T) {
		s, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f(t, s)
	})
}

func TestRecordsRoundTrip(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		want := []replica.Record{
			rec("a", replica.KindState, 7, "state"),
			rec("a", replica.KindContinuity, 8, "response"),
			{Key: replica.Key{Type: "counter", ID: "a"}, Kind: replica.KindContinuity, Name: "req-2", Epoch: replica.Epoch{Term: 2, Node: node}, Version: 9, Value: []byte("other")},
			{Key: replica.Key{Type: "counter", ID: "a"}, Kind: replica.KindPromise, Epoch: replica.Epoch{Term: 5, Node: node}},
			{Key: replica.Key{Type: "counter", ID: "gone"}, Kind: replica.KindState, Epoch: replica.Epoch{Term: 1, Node: node}, Version: 3, Tombstone: true},
		}
		if err := s.Put(ctx, want...); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			got, ok, err := s.Get(ctx, w.Key, w.Slot())
			if err != nil || !ok || !reflect.DeepEqual(got, w) {
				t.Fatalf("Get(%v, %v) = %+v, %v, %v; want %+v", w.Key, w.Slot(), got, ok, err, w)
			}
		}
		if _, ok, err := s.Get(ctx, replica.Key{Type: "counter", ID: "none"}, replica.Slot{Kind: replica.KindState}); ok || err != nil {
			t.Fatalf("Get of a record never stored: ok %v, err %v", ok, err)
		}
		// A Put replaces the record of the same key and slot.
		newer := rec("a", replica.KindState, 9, "newer")
		if err := s.Put(ctx, newer); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := s.Get(ctx, newer.Key, newer.Slot()); !reflect.DeepEqual(got, newer) {
			t.Fatalf("after a second Put, Get = %+v, want %+v", got, newer)
		}
	})
}

func TestHeldGivesEachListedRecordWithoutItsValue(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		stored := []replica.Record{
			rec("a", replica.KindState, 7, "state"),
			rec("a", replica.KindContinuity, 8, "response"),
			{Key: replica.Key{Type: "counter", ID: "a"}, Kind: replica.KindPromise, Epoch: replica.Epoch{Term: 5, Node: node}, Value: []byte("horizon")},
			{Key: replica.Key{Type: "counter", ID: "gone"}, Kind: replica.KindState, Epoch: replica.Epoch{Term: 1, Node: node}, Version: 3, Tombstone: true, Value: []byte("date")},
		}
		if err := s.Put(ctx, stored...); err != nil {
			t.Fatal(err)
		}
		var sorted []replica.Record
		if err := s.Range(ctx, ring.Range{}, func(r replica.Record) bool { sorted = append(sorted, r); return true }); err != nil {
			t.Fatal(err)
		}
		// The records as a source lists them (in ring order, values
		// left out), with one this store lacks in the middle and one at
		// the end.
		var listed []replica.Record
		for i, r := range sorted {
			if i == 2 {
				listed = append(listed, rec("b", replica.KindState, 1, ""))
			}
			r.Value = nil
			listed = append(listed, r)
		}
		listed = append(listed, rec("zz", replica.KindContinuity, 1, ""))
		seen := 0
		err := s.Held(ctx, listed, func(i int, held replica.Record, ok bool) {
			if i != seen {
				t.Fatalf("Held gave record %d after %d", i, seen-1)
			}
			seen++
			want, had := replica.Record{}, false
			for _, r := range stored {
				if r.Key == listed[i].Key && r.Slot() == listed[i].Slot() {
					want, had = r, true
				}
			}
			if want.Kind != replica.KindPromise {
				want.Value = nil
			}
			if ok != had || !reflect.DeepEqual(held, want) {
				t.Fatalf("Held of %v %v: %+v, %v; want %+v, %v", listed[i].Key, listed[i].Slot(), held, ok, want, had)
			}
		})
		if err != nil || seen != len(listed) {
			t.Fatalf("Held gave %d of %d records: %v", seen, len(listed), err)
		}
	})
}

func TestRangeVisitsTokenRangesInOrder(t *testing.T) {
	stores(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		var all []replica.Record
		for i := range 50 {
			all = append(all, rec(fmt.Sprint(i), replica.KindState, 1, "v"))
		}
		if err := s.Put(ctx, all...); err != nil {
			t.Fatal(err)
		}
		tokens := make([]ring.Token, 0, len(all))
		for _, r := range all {
			tokens = append(tokens, r.Key.Token())
		}
		slices.Sort(tokens)
		collect := func(g ring.Range) []ring.Token {
			var got []ring.Token
			if err := s.Range(ctx, g, func(r replica.Record) bool {
				got = append(got, r.Key.Token())
				return true
			}); err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := collect(ring.Range{}); !slices.Equal(got, tokens) {
			t.Fatalf("the whole ring gave %d tokens out of order or missing, want %d sorted", len(got), len(tokens))
		}
		// (t10, t30] holds t11..t30.
		from, to := tokens[10], tokens[30]
		if got := collect(ring.Range{Start: from, End: to}); !slices.Equal(got, tokens[11:31]) {
			t.Fatalf("(t10, t30] gave %v, want %v", got, tokens[11:31])
		}
		wrapped := append(slices.Clone(tokens[31:]), tokens[:11]...)
		if got := collect(ring.Range{Start: to, End: from}); !slices.Equal(got, wrapped) {
			t.Fatalf("the wrapped range (t30, t10] gave %v, want %v", got, wrapped)
		}
		rotated := append(slices.Clone(tokens[21:]), tokens[:21]...)
		if got := collect(ring.Range{Start: tokens[20], End: tokens[20]}); !slices.Equal(got, rotated) {
			t.Fatalf("the whole ring from t20 gave %v, want %v", got, rotated)
		}
		n := 0
		_ = s.Range(ctx, ring.Range{}, func(replica.Record) bool { n++; return n < 3 })
		if n != 3 {
			t.Fatalf("Range went on after fn returned false: %d calls", n)
		}
	})
}

func TestAClosedStoreSaysSo(t *testing.T) {
	for name, s := range map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory() },
		"badger": func(t *testing.T) Store {
			b, err := Open(t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := s(t)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if err := st.Put(context.Background(), rec("a", replica.KindState, 1, "x")); !errors.Is(err, replication.ErrClosed) {
				t.Fatalf("Put after Close: %v, want ErrClosed", err)
			}
			if err := st.Held(context.Background(), []replica.Record{rec("a", replica.KindState, 1, "")}, func(int, replica.Record, bool) {}); !errors.Is(err, replication.ErrClosed) {
				t.Fatalf("Held after Close: %v, want ErrClosed", err)
			}
		})
	}
}

func TestReopenRecoversTheRecords(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := rec("a", replica.KindState, 4, "kept")
	if err := s.Put(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, ok, err := s.Get(ctx, want.Key, want.Slot()); err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopening, Get = %+v, %v, %v; want %+v", got, ok, err, want)
	}
}

// rawUpdate changes the database under dir with badger itself, as another
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

func TestANewerFormatIsRefusedAndLeftAlone(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(formatKey, encodeFormat(formatVersion+1)) })
	_, err = Open(dir, Options{})
	var fe *replication.FormatError
	if !errors.Is(err, replication.ErrNewerFormat) || !errors.As(err, &fe) || fe.Found != formatVersion+1 || fe.Supported != formatVersion {
		t.Fatalf("opening a newer format: %v, want a FormatError found %d supported %d", err, formatVersion+1, formatVersion)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if err != nil {
			return err
		}
		v, _ := item.ValueCopy(nil)
		if !bytes.Equal(v, encodeFormat(formatVersion+1)) {
			t.Errorf("the refused store's format record was changed to %x", v)
		}
		return nil
	})
}

func TestADamagedRecordIsReportedNotReset(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rec("a", replica.KindState, 4, "precious")
	if err := s.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	key := appendKey(nil, r.Key, r.Slot())
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, _ := item.ValueCopy(nil)
		v[len(v)-1] ^= 0x40
		return txn.Set(key, v)
	})
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Get(ctx, r.Key, r.Slot()); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("Get of a flipped value: %v, want ErrCorrupt", err)
	}
	if err := s.Range(ctx, ring.Range{}, func(replica.Record) bool { return true }); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("Range over a flipped value: %v, want ErrCorrupt", err)
	}
	if err := s.Held(ctx, []replica.Record{r}, func(int, replica.Record, bool) {}); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("Held of a flipped value: %v, want ErrCorrupt", err)
	}
}

func TestAStoreWithoutItsFormatRecordIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Put(context.Background(), rec("a", replica.KindState, 1, "x"))
	_ = s.Close()
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Delete(formatKey) })
	if _, err := Open(dir, Options{}); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("opening records without a format record: %v, want ErrCorrupt", err)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(formatKey, []byte{0, 0, 0, 1, 9, 9, 9, 9}) })
	if _, err := Open(dir, Options{}); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("opening a damaged format record: %v, want ErrCorrupt", err)
	}
}

// TestConcurrentSyncedWritersAllLand: with Sync, concurrent Puts (which
// badger commits together, one fsync per batch) all return and all are
// there after reopening.
func TestConcurrentSyncedWritersAllLand(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, Options{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	if !s.db.Opts().SyncWrites {
		t.Fatal("Sync did not reach badger's SyncWrites")
	}
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Put(ctx, rec(fmt.Sprintf("%d-%d", w, i), replica.KindState, uint64(i), "v")); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	_ = s.Close()
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	if err := s.Range(ctx, ring.Range{}, func(replica.Record) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != writers*each {
		t.Fatalf("after reopening, %d records, want %d", n, writers*each)
	}
}

// capture is a slog handler that keeps messages.
type capture struct {
	mu   sync.Mutex
	msgs []string
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, r.Message)
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

func TestBadgerLogsThroughSlog(t *testing.T) {
	h := &capture{}
	s, err := Open(t.TempDir(), Options{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.msgs) == 0 {
		t.Fatal("badger logged nothing through the given slog.Logger on open and close")
	}
}

// A Put larger than one badger transaction is written in several: it
// returns only once every record is stored, and ErrTxnTooBig never
// reaches the caller (the driver would stop on it).
func TestAPutLargerThanATransactionIsWrittenWhole(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			// Eight records of 512 KiB pass badger's size limit per
			// transaction (15% of the 16 MiB memtable).
			var recs []replica.Record
			big := string(make([]byte, 512<<10))
			for i := range 8 {
				recs = append(recs, rec(fmt.Sprint("big-", i), replica.KindState, 1, big))
			}
			ctx := context.Background()
			if err := s.db.Update(func(txn *badger.Txn) error {
				for _, r := range recs {
					k := appendKey(nil, r.Key, r.Slot())
					if err := txn.Set(k, encodeValue(k, r)); err != nil {
						return err
					}
				}
				return nil
			}); !errors.Is(err, badger.ErrTxnTooBig) {
				t.Fatalf("the test's records fit one transaction (%v): they must not", err)
			}
			if err := s.Put(ctx, recs...); err != nil {
				t.Fatalf("a Put larger than a transaction returned %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(dir, Options{}); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			n := 0
			if err := s.Range(ctx, ring.Range{}, func(replica.Record) bool { n++; return true }); err != nil {
				t.Fatal(err)
			}
			if n != len(recs) {
				t.Fatalf("the reopened store holds %d records, want %d", n, len(recs))
			}
		})
	}
}

// A store in format 1 (whose checksums did not cover the keys; never
// released) is refused with ErrOlderFormat and left as it is.
func TestAnOlderFormatIsRefusedAndLeftAlone(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(formatKey, encodeFormat(1)) })
	_, err = Open(dir, Options{})
	var fe *replication.FormatError
	if !errors.Is(err, replication.ErrOlderFormat) || errors.Is(err, replication.ErrNewerFormat) || !errors.As(err, &fe) || fe.Found != 1 || fe.Oldest != oldestFormat {
		t.Fatalf("opening format 1: %v, want a FormatError matching ErrOlderFormat", err)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if err != nil {
			return err
		}
		v, _ := item.ValueCopy(nil)
		if !bytes.Equal(v, encodeFormat(1)) {
			t.Errorf("the refused store's format record was changed to %x", v)
		}
		return nil
	})
}

// A record's checksum covers its key: a value found under another key (a
// damaged key that still decodes) is reported as corrupt, not read as
// the other key's record.
func TestADamagedKeyIsReportedNotRead(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rec("a", replica.KindState, 4, "precious")
	if err := s.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	key := appendKey(nil, r.Key, r.Slot())
	other := replica.Slot{Kind: replica.KindContinuity}
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, _ := item.ValueCopy(nil)
		if err := txn.Delete(key); err != nil {
			return err
		}
		return txn.Set(appendKey(nil, r.Key, other), v)
	})
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Get(ctx, r.Key, other); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("Get of a record under a damaged key: %v, want ErrCorrupt", err)
	}
	if err := s.Range(ctx, ring.Range{}, func(replica.Record) bool { return true }); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("Range over a record under a damaged key: %v, want ErrCorrupt", err)
	}
}

// A key whose kind byte no format knows is corrupt.
func TestAKeyOfAnUnknownKindIsCorrupt(t *testing.T) {
	b := appendKey(nil, replica.Key{Type: "counter", ID: "a"}, replica.Slot{Kind: replica.KindContinuity + 1})
	if _, _, err := decodeKey(b); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("a key of kind %d decoded with %v, want ErrCorrupt", replica.KindContinuity+1, err)
	}
}

// A Range that stops after one record copies that record, not the rest
// of the range: a catch-up chunk's memory follows the chunk, not what is
// left to send.
func TestMemoryRangeCopiesOnlyWhatItHandsOut(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	const records, size = 64, 64 << 10
	for i := range records {
		r := rec(fmt.Sprint(i), replica.KindState, 1, "")
		r.Value = make([]byte, size)
		if err := m.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := m.Range(ctx, ring.Range{}, func(replica.Record) bool { return false }); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 8*size {
		t.Fatalf("a Range that took one record of %d bytes allocated %d bytes (%d records in range)", size, got, records)
	}
}

// A Memory writes a record over the one it holds in the same slot, into
// that one's buffer while the value fits it: what a caller holds (a
// value it put, one it got) stays as it was, and the store takes what the
// caller put, not the caller's buffer. Erasing a key's last record
// forgets the key.
func TestMemoryReusesOnlyItsOwnBuffers(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	put := func(r replica.Record) {
		t.Helper()
		if err := m.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	first := rec("a", replica.KindState, 1, "first value")
	put(first)
	got, _, _ := m.Get(ctx, first.Key, first.Slot())
	second := rec("a", replica.KindState, 2, "second")
	put(second)
	second.Value[0] = 'X' // the caller's buffer, changed after the Put
	if string(first.Value) != "first value" || string(got.Value) != "first value" {
		t.Fatalf("a Put over a record changed what callers held: put %q, got %q", first.Value, got.Value)
	}
	if now, _, _ := m.Get(ctx, first.Key, first.Slot()); string(now.Value) != "second" || now.Version != 2 {
		t.Fatalf("the store holds %q at version %d, want %q at 2", now.Value, now.Version, "second")
	}
	if allocs := testing.AllocsPerRun(100, func() { put(second) }); allocs != 0 {
		t.Fatalf("a Put over a record whose value fits allocated %v times", allocs)
	}
	// A value much smaller than the buffer gets its own.
	big := rec("a", replica.KindState, 3, string(make([]byte, 4096)))
	put(big)
	put(rec("a", replica.KindState, 4, "small"))
	m.mu.Lock()
	c := cap(m.keys[first.Key].recs[0].Value)
	m.mu.Unlock()
	if c > 64+2*len("small") {
		t.Fatalf("a 5-byte value kept a buffer of %d bytes", c)
	}
	other := rec("a", replica.KindContinuity, 1, "answer")
	put(other)
	put(replica.Erasing(first))
	put(replica.Erasing(other))
	m.mu.Lock()
	left := len(m.keys)
	m.mu.Unlock()
	if left != 0 {
		t.Fatalf("erasing a key's last record left %d keys", left)
	}
}
