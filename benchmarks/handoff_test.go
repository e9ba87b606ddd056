package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/system"
)

func TestTransferWatchEndsWhenNothingIsLeftToReceive(t *testing.T) {
	var w transferWatch
	for i, s := range []struct {
		receiving int
		bytes     int64
		done      bool
	}{
		{0, 0, false},   // not started yet
		{4, 0, false},   // receiving, nothing arrived
		{4, 500, false}, // arriving
		{1, 900, false},
		{0, 1000, true},
	} {
		if got := w.observe(s.receiving, s.bytes); got != s.done {
			t.Fatalf("sample %d (receiving %d, %d bytes): done %v, want %v", i, s.receiving, s.bytes, got, s.done)
		}
	}
	if w.bytes != 1000 {
		t.Errorf("the watch holds %d bytes, want the last sample's 1000", w.bytes)
	}
}

func TestTransferWatchWaitsForTheHandOffToStart(t *testing.T) {
	var w transferWatch
	for range 3 {
		if w.observe(0, 0) {
			t.Fatal("a member that never received anything was taken for done")
		}
	}
	if w.started {
		t.Error("the watch says started with nothing received and no range to receive")
	}
	// Bytes with no range left: a hand-off that ended between two samples.
	if !w.observe(0, 10) {
		t.Error("a member with bytes received and nothing left to receive was not taken for done")
	}
}

func TestStatsAnswerParses(t *testing.T) {
	r, b, err := parseStats(statsAnswer(system.Stats{Receiving: 3, ReceivedBytes: 1 << 40}))
	if err != nil || r != 3 || b != 1<<40 {
		t.Fatalf("parseStats(statsAnswer(3, 2^40)) = %d, %d, %v; want 3, 2^40, nil", r, b, err)
	}
	for _, bad := range []string{"", "3", "3 x", "x 3", "unknown query"} {
		if _, _, err := parseStats(bad); err == nil {
			t.Errorf("parseStats(%q) succeeded, want an error", bad)
		}
	}
}

func TestWindowKeepsTheAsksStartedInIt(t *testing.T) {
	t0 := time.Now()
	fail := errors.New("refused")
	asks := []askSample{
		{t0.Add(-time.Second), 1, nil},
		{t0, 2, nil},
		{t0.Add(time.Second), 3, fail},
		{t0.Add(2 * time.Second), 4, nil},
		{t0.Add(3 * time.Second), 5, nil},
	}
	lat, failed, err := window(asks, t0, t0.Add(3*time.Second))
	if len(lat) != 2 || lat[0] != 2 || lat[1] != 4 || failed != 1 || err != fail {
		t.Errorf("window [t0, t0+3s) = %v, %d failed, %v; want [2 4], 1 failed, %v", lat, failed, err, fail)
	}
	if lat, failed, _ := window(asks, t0.Add(2*time.Second), time.Time{}); len(lat) != 2 || failed != 0 {
		t.Errorf("window [t0+2s, no end) = %v, %d failed; want [4 5], none failed", lat, failed)
	}
}

func TestEndedByDropsTheAsksStillOut(t *testing.T) {
	t0 := time.Now()
	asks := []askSample{{t0, time.Second, nil}, {t0, 3 * time.Second, nil}, {t0.Add(time.Second), 5 * time.Second, errors.New("deadline")}}
	got := endedBy(asks, t0.Add(2*time.Second))
	if len(got) != 1 || got[0].d != time.Second {
		t.Errorf("endedBy(t0+2s) = %v, want the one ask that took 1 s from t0", got)
	}
}

func TestBulkTCPDeliversEveryByte(t *testing.T) {
	addr, stop, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// Not a multiple of the source's buffer: the last write is partial.
	const n = 3<<20 + 12345
	d, err := bulkTCP(addr, n)
	if err != nil {
		t.Fatalf("bulk TCP of %d bytes: %v", n, err)
	}
	if d <= 0 {
		t.Errorf("bulk TCP of %d bytes took %v, want a positive time", n, d)
	}
}

func TestHandoffReportPrintsItsLineRatiosAndFloors(t *testing.T) {
	m := measurement{primary: 600, base: 1000, mb: 80, secs: 80.0 / 600, upSecs: 0.5,
		p50: time.Millisecond, p99: 3 * time.Millisecond, streamP99: 3 * time.Millisecond, idleP99: 2 * time.Millisecond}
	results := map[string]map[string][]measurement{"handoff-transfer": {"troupe": {m}}}
	var out bytes.Buffer
	report(&out, options{only: []string{"handoff-transfer"}}, []peer{troupePeer{}}, results)
	for _, want := range []string{
		"\nhandoff-transfer: 600.0 MB/s to the joining member (80.0 MB in 0.13 s), bulk TCP 1000.0 MB/s; ask p99 idle 2ms, during 3ms",
		"\nratio handoff-transfer 0.60\n",
		"\nratio handoff-ask-p99 1.50\n",
		"handoff-transfer >= 0.5x bulk TCP  holds",
		"handoff ask p99 <= 2x idle         holds",
	} {
		if !strings.Contains("\n"+out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	m.primary, m.p99 = 400, 5*time.Millisecond
	results["handoff-transfer"]["troupe"][0] = m
	out.Reset()
	report(&out, options{only: []string{"handoff-transfer"}}, []peer{troupePeer{}}, results)
	for _, want := range []string{"handoff-transfer >= 0.5x bulk TCP  BELOW", "handoff ask p99 <= 2x idle         BELOW"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("at 0.4x bulk TCP and 2.5x the idle p99 the report lacks %q:\n%s", want, out.String())
		}
	}
}
