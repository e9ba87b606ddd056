package replicastore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

func openBadger(t *testing.T, dir string, opts Options) *Badger {
	t.Helper()
	b, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A store without Sync whose run stopped without Close may have lost its
// last writes, all of them if it opens empty, if the machine restarted
// since (a power loss) or where the boot is unknown: the next Open
// reports it unclean and records the whole ring as receiving. A process
// killed on the same boot lost nothing (the kernel holds what it wrote),
// nor did a clean Close or a run with Sync (every Put fsynced).
func TestAStopWithoutCloseAndWithoutSyncIsUncleanAfterARestartOfTheMachine(t *testing.T) {
	ctx := context.Background()
	const (
		closed = iota
		killed
		powerLost
	)
	for _, tc := range []struct {
		name    string
		sync    bool
		write   bool
		stop    int
		boot    []byte // the runs' boot; nil: this machine's
		unclean bool
	}{
		{"power loss after writes without Sync", false, true, powerLost, nil, true},
		{"process killed after writes without Sync", false, true, killed, nil, false},
		{"process killed without Sync where the boot is unknown", false, true, killed, unknownBoot, true},
		{"clean close without Sync", false, true, closed, nil, false},
		{"power loss after writes with Sync", true, true, powerLost, nil, false},
		{"power loss of a store that holds no records (it may have taken them all)", false, false, powerLost, nil, true},
		{"power loss of an empty store with Sync", true, false, powerLost, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := openBadger(t, dir, Options{Sync: tc.sync, boot: tc.boot})
			if b.Unclean() {
				t.Fatal("a new store reports an unclean stop")
			}
			if tc.write {
				if err := b.Put(ctx, rec("a", replica.KindState, 1, "x")); err != nil {
					t.Fatal(err)
				}
			}
			switch tc.stop {
			case closed:
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
			case killed:
				if err := crash(b); err != nil {
					t.Fatal(err)
				}
			case powerLost:
				powerLoss(t, b)
			}
			b = openBadger(t, dir, Options{boot: tc.boot})
			defer b.Close()
			if b.Unclean() != tc.unclean {
				t.Fatalf("reopened after %s: Unclean() = %v, want %v", tc.name, b.Unclean(), tc.unclean)
			}
			if got := receiving(t, b); wholeRing(got) != tc.unclean {
				t.Fatalf("reopened after %s: receiving %v, want the whole ring: %v", tc.name, got, tc.unclean)
			}
		})
	}
}

// The boot record vouches for one boot only: a run killed on one boot
// and opened on another is unclean.
func TestABootRecordOfAnotherBootIsUnclean(t *testing.T) {
	dir := t.TempDir()
	b := openBadger(t, dir, Options{boot: []byte("boot-a")})
	if err := b.Put(context.Background(), rec("a", replica.KindState, 1, "x")); err != nil {
		t.Fatal(err)
	}
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	b = openBadger(t, dir, Options{boot: []byte("boot-a")})
	if b.Unclean() {
		t.Fatal("a run killed and reopened on its own boot was reported unclean")
	}
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	b = openBadger(t, dir, Options{boot: []byte("boot-b")})
	defer b.Close()
	if !b.Unclean() {
		t.Fatal("a run killed on one boot and reopened on another was not reported unclean")
	}
}

// Each Open arms the marker for its own run: a power loss after a clean
// stop and a reopen without Sync is unclean again, and the loss stays
// recorded through a later run with Sync that crashes (its own run lost
// nothing, but the one before it may have).
func TestTheCleanStopMarkerCoversOneRunAndTheLossStaysRecorded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openBadger(t, dir, Options{})
	if err := b.Put(ctx, rec("a", replica.KindState, 1, "x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBadger(t, dir, Options{})
	powerLoss(t, b)
	b = openBadger(t, dir, Options{Sync: true})
	if !b.Unclean() {
		t.Fatal("a power loss of a run without Sync after a clean stop was not reported")
	}
	powerLoss(t, b)
	b = openBadger(t, dir, Options{})
	defer b.Close()
	if b.Unclean() {
		t.Fatal("a power loss of a run with Sync was reported unclean")
	}
	if got := receiving(t, b); !wholeRing(got) {
		t.Fatalf("after the loss and a run with Sync the store records receiving %v, want the whole ring", got)
	}
}

// A run that opened unclean and stopped cleanly before anything caught
// up (a deploy) must not hide the loss: with or without Sync, the next
// Open still records the whole ring as receiving, until SetReceiving
// records less.
func TestACleanCloseOfAnUncleanRunKeepsTheLossRecorded(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []bool{false, true} {
		dir := t.TempDir()
		b := openBadger(t, dir, Options{})
		if err := b.Put(ctx, rec("a", replica.KindState, 1, "x")); err != nil {
			t.Fatal(err)
		}
		powerLoss(t, b)
		b = openBadger(t, dir, Options{Sync: sync})
		if !b.Unclean() {
			t.Fatal("the run after the power loss did not open unclean")
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b = openBadger(t, dir, Options{})
		if got := receiving(t, b); !wholeRing(got) {
			t.Fatalf("sync=%v: after an unclean run closed cleanly the store records receiving %v, want the whole ring", sync, got)
		}
		if err := b.SetReceiving(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b = openBadger(t, dir, Options{})
		if got, recorded, err := b.Receiving(ctx); err != nil || len(got) != 0 || !recorded {
			t.Fatalf("sync=%v: after the driver recorded it caught up the store receives %v (recorded %v, %v), want nothing", sync, got, recorded, err)
		}
		b.Close()
	}
}

// SetReceiving's ranges survive a crash (they are synced whatever the
// options), and a new store has recorded none.
func TestTheReceivingRangesSurviveACrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openBadger(t, dir, Options{Sync: true})
	if got, recorded, err := b.Receiving(ctx); err != nil || got != nil || recorded {
		t.Fatalf("a new store receives %v (recorded %v, %v), want none recorded", got, recorded, err)
	}
	want := []ring.Range{{Start: 10, End: 20}, {Start: math.MaxUint64 - 5, End: 3}}
	if err := b.SetReceiving(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := crash(b); err != nil {
		t.Fatal(err)
	}
	b = openBadger(t, dir, Options{Sync: true})
	defer b.Close()
	if got, recorded, err := b.Receiving(ctx); err != nil || !slices.Equal(got, want) || !recorded {
		t.Fatalf("after a crash the store receives %v (recorded %v, %v), want %v", got, recorded, err, want)
	}
}

// A new receiving record that only removes tokens from the one it
// replaces is not synced; any other is.
func TestOnlyARecordThatRemovesRangesGoesUnsynced(t *testing.T) {
	whole := ring.Range{}
	for _, c := range []struct {
		name    string
		old, to []ring.Range
		removes bool
	}{
		{"one range received", []ring.Range{{Start: 10, End: 20}, {Start: 30, End: 40}}, []ring.Range{{Start: 30, End: 40}}, true},
		{"the last received", []ring.Range{{Start: 10, End: 20}}, nil, true},
		{"the same", []ring.Range{{Start: 10, End: 20}}, []ring.Range{{Start: 10, End: 20}}, true},
		{"part of a range received", []ring.Range{{Start: 10, End: 20}}, []ring.Range{{Start: 15, End: 20}}, true},
		{"part of the whole ring received, across its end", []ring.Range{whole}, []ring.Range{{Start: math.MaxUint64 - 5, End: 3}}, true},
		{"a range added", []ring.Range{{Start: 10, End: 20}}, []ring.Range{{Start: 10, End: 20}, {Start: 30, End: 40}}, false},
		{"a range widened", []ring.Range{{Start: 10, End: 20}}, []ring.Range{{Start: 10, End: 21}}, false},
		{"the first ranges", nil, []ring.Range{{Start: 10, End: 20}}, false},
		{"the whole ring", []ring.Range{{Start: 10, End: 20}}, []ring.Range{whole}, false},
		{"one range swapped for another", []ring.Range{{Start: 10, End: 20}}, []ring.Range{{Start: 30, End: 40}}, false},
	} {
		if got := onlyRemoves(c.old, c.to); got != c.removes {
			t.Errorf("%s: onlyRemoves(%v, %v) = %v, want %v", c.name, c.old, c.to, got, c.removes)
		}
	}
	b := openBadger(t, t.TempDir(), Options{})
	defer b.Close()
	ctx := context.Background()
	for i, c := range []struct {
		ranges []ring.Range
		synced bool
	}{
		{[]ring.Range{whole}, true},
		{[]ring.Range{{Start: 10, End: 20}, {Start: 30, End: 40}}, false},
		{[]ring.Range{{Start: 30, End: 40}}, false},
		{[]ring.Range{{Start: 30, End: 41}}, true},
		{nil, false},
	} {
		before := receivingSynced(b)
		if err := b.SetReceiving(ctx, c.ranges); err != nil {
			t.Fatal(err)
		}
		if synced := receivingSynced(b) > before; synced != c.synced {
			t.Errorf("receiving record %d (%v): synced %v, want %v", i, c.ranges, synced, c.synced)
		}
		if got, _, err := b.Receiving(ctx); err != nil || !slices.Equal(got, c.ranges) {
			t.Errorf("receiving record %d reads as %v, %v; want %v", i, got, err, c.ranges)
		}
	}
}

// A damaged receiving record is ErrCorrupt, not an empty list.
func TestADamagedReceivingRecordIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	b := openBadger(t, dir, Options{})
	if err := b.SetReceiving(context.Background(), []ring.Range{{Start: 1, End: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, dir, func(txn *badger.Txn) error {
		v := encodeReceiving([]ring.Range{{Start: 1, End: 2}})
		v[len(v)-1] ^= 1
		return txn.Set(receivingKey, v)
	})
	b = openBadger(t, dir, Options{})
	defer b.Close()
	if _, _, err := b.Receiving(context.Background()); !errors.Is(err, replication.ErrCorrupt) {
		t.Fatalf("a damaged receiving record gave %v, want ErrCorrupt", err)
	}
}

// Formats 2 and 3 were never released: they are refused as older, not
// upgraded, and the directory is left as it was.
func TestUnreleasedFormatsAreRefusedAndLeftAlone(t *testing.T) {
	for _, v := range []uint32{2, 3} {
		dir := t.TempDir()
		b := openBadger(t, dir, Options{})
		if err := b.Put(context.Background(), rec("a", replica.KindState, 1, "x")); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set(formatKey, encodeFormat(v)) })
		_, err := Open(dir, Options{})
		var fe *replication.FormatError
		if !errors.Is(err, replication.ErrOlderFormat) || !errors.As(err, &fe) || fe.Found != v {
			t.Fatalf("opening format %d: %v, want a FormatError matching ErrOlderFormat", v, err)
		}
		rawUpdate(t, dir, func(txn *badger.Txn) error {
			item, err := txn.Get(formatKey)
			if err != nil {
				return err
			}
			got, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if f, err := decodeFormat(got); err != nil || f != v {
				t.Fatalf("after the refusal the format record says %d, %v; want %d", f, err, v)
			}
			if _, err := txn.Get(cleanKey); err != nil {
				t.Fatalf("after the refusal the clean-stop marker is gone: %v", err)
			}
			return nil
		})
	}
}

func receiving(t *testing.T, b *Badger) []ring.Range {
	t.Helper()
	got, _, err := b.Receiving(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wholeRing(rs []ring.Range) bool { return slices.Equal(rs, []ring.Range{{}}) }

// A Memory store keeps the receiving ranges as it keeps records, for as
// long as the store lives.
func TestMemoryKeepsTheReceivingRanges(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	if got, recorded, err := m.Receiving(ctx); err != nil || got != nil || recorded {
		t.Fatalf("a new memory store receives %v (recorded %v, %v), want none recorded", got, recorded, err)
	}
	want := []ring.Range{{Start: 1, End: 2}}
	if err := m.SetReceiving(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, recorded, err := m.Receiving(ctx); err != nil || !slices.Equal(got, want) || !recorded {
		t.Fatalf("the memory store receives %v (recorded %v, %v), want %v", got, recorded, err, want)
	}
	m.Close()
	if err := m.SetReceiving(ctx, nil); !errors.Is(err, replication.ErrClosed) {
		t.Fatalf("SetReceiving on a closed store returned %v, want ErrClosed", err)
	}
}

// A process killed while it wrote (no Close, no Sync) and reopened on
// the same boot lost nothing: every record it was told was written is
// there, the store is not unclean, and Open made the killed run's files
// durable before it armed the marker of its own run.
func TestAProcessKilledWhileItWroteLosesNothingOnTheSameBoot(t *testing.T) {
	if bootID() == nil {
		t.Skip("this system has no boot id to read")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child reports each record once Put returned, then writes on
	// until it is killed.
	lines := bufio.NewScanner(out)
	written := 0
	for written < childRecords && lines.Scan() {
		written++
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if written < childRecords {
		t.Fatalf("the child reported %d records written, want %d", written, childRecords)
	}
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, sync := range []bool{true, false} {
		b := openBadger(t, dir, Options{Sync: sync, Logger: logger})
		if b.Unclean() {
			t.Fatalf("sync=%v: a store whose process was killed on this boot opened unclean; it logged:\n%s", sync, log.String())
		}
		if sync && !b.afterKill {
			t.Fatal("the Open after the kill did not make the killed run's files durable")
		}
		for i := range written {
			k := replica.Key{Type: "counter", ID: "k" + strconv.Itoa(i)}
			if r, ok, err := b.Get(context.Background(), k, replica.Slot{Kind: replica.KindState}); err != nil || !ok || string(r.Value) != "v" {
				t.Fatalf("sync=%v: record %d, reported written before the kill, reads %v, %v, %v", sync, i, r, ok, err)
			}
		}
		if err := crash(b); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	envChild     = "TROUPE_REPLICASTORE_CHILD" // the child's store directory
	childRecords = 500
)

// runChild is the body of the child process of
// TestAProcessKilledWhileItWroteLosesNothingOnTheSameBoot: it writes
// records without Sync, printing a line after each Put returns, until it
// is killed.
func runChild(dir string) {
	b, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		if err := b.Put(context.Background(), rec("k"+strconv.Itoa(i), replica.KindState, 1, "v")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(i)
	}
}
