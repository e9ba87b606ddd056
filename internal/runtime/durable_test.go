package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/host"
)

func TestARecordOfANewerFormatIsRefused(t *testing.T) {
	_, _, _, err := decodeRecord[int](nil, []byte{recordVersionPending + 1, 1, 0x05, 0})
	if !errors.Is(err, errRecord) {
		t.Fatalf("a record of format %d: %v, want errRecord", recordVersionPending+1, err)
	}
}

func TestARecordRoundTripsItsStateAndTimers(t *testing.T) {
	rec := []byte{recordVersion}
	rec = appendString(rec, "\x2a") // msgpack 42
	rec = append(rec, 1)            // one timer
	rec = appendString(rec, "tick")
	due := time.Unix(1700000000, 5)
	rec = appendVarint(rec, due.UnixNano())
	rec = appendVarint(rec, int64(time.Second))
	rec = appendString(rec, "m")
	rec = appendString(rec, "\xc0")
	s, timers, _, err := decodeRecord[int](nil, rec)
	if err != nil || s != 42 || len(timers) != 1 {
		t.Fatalf("decode: %d %v %v", s, timers, err)
	}
	tm := timers[0]
	if tm.name != "tick" || !tm.due.Equal(due) || tm.period != time.Second || tm.msg != "m" || !bytes.Equal(tm.body, []byte{0xc0}) {
		t.Fatalf("the timer decoded as %+v", tm)
	}
}

func TestATruncatedRecordIsRefused(t *testing.T) {
	rec := []byte{recordVersion}
	rec = appendString(rec, "\x2a")
	for i := range len(rec) {
		if _, _, _, err := decodeRecord[int](nil, rec[:i]); err == nil {
			t.Fatalf("a record cut at %d bytes decoded", i)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{recordVersion, 1, 0x2a, 0})
	f.Add([]byte{recordVersion, 1, 0x2a, 1, 1, 't', 2, 2, 1, 'm', 1, 0xc0})
	f.Add(appendRetained([]byte{recordVersionKept, 1, 0x2a, 0}, []retained{{key: "k", at: time.Unix(1, 0).UnixNano(), rid: host.NamedRequestID("r"), kind: retainedReply, body: []byte{0x01}}}))
	f.Add(appendRetained([]byte{recordVersionPending, 1, 0x2a, 0}, []retained{{key: "k", at: time.Unix(1, 0).UnixNano(), rid: host.NamedRequestID("r"), kind: retainedPending, attempt: 2}}))
	h := host.New(host.Settings{})
	defer h.Close(f.Context())
	f.Fuzz(func(t *testing.T, b []byte) {
		_, timers, kept, err := decodeRecord[map[string]int](h, b)
		// The header look agrees with the whole decode wherever that
		// one reads the record.
		const retain = time.Hour
		due, has := RecordWakeDue(b, retain)
		if err != nil {
			return
		}
		first := int64(math.MaxInt64)
		for _, tm := range timers {
			first = min(first, tm.due.UnixNano())
		}
		for _, a := range kept {
			if a.at < math.MaxInt64-int64(retain) {
				first = min(first, a.at+int64(retain))
			}
		}
		if want := first != math.MaxInt64; has != want || has && due.UnixNano() != first {
			t.Fatalf("RecordWakeDue says %v, %v of a record whose timers and kept answers make it %v, %v", due, has, time.Unix(0, first), want)
		}
	})
}

func TestRecordWakeDueReadsTheTimersAndKeptAnswersOnly(t *testing.T) {
	timer := func(b []byte, name string, due int64) []byte {
		b = appendString(b, name)
		b = appendVarint(b, due)
		b = appendVarint(b, 0)
		b = appendString(b, "m")
		return appendString(b, "\xc0")
	}
	with := []byte{recordVersion}
	with = appendString(with, "\x2a")
	with = append(with, 2)
	with = timer(with, "late", 2e9)
	with = timer(with, "early", 1e9)
	without := append(appendString([]byte{recordVersionKept}, "\x2a"), 0)
	answers := appendRetained(slices.Clone(without), []retained{
		{key: "k1", at: time.Unix(5, 0).UnixNano(), kind: retainedReply, body: []byte{1}},
		{key: "k2", at: time.Unix(3, 0).UnixNano(), kind: retainedFailed, text: "boom"},
	})
	const retain = 10 * time.Second
	timerAndAnswers := append([]byte{recordVersionKept}, with[1:]...)
	timerAndAnswers = appendRetained(timerAndAnswers, []retained{{key: "k", at: time.Unix(0, 0).UnixNano(), kind: retainedNoReply}})
	for _, c := range []struct {
		name   string
		rec    []byte
		retain time.Duration
		due    time.Time
		want   bool
	}{
		{"kept answers: the oldest past its retention", answers, retain, time.Unix(13, 0), true},
		{"kept answers, no retention given", answers, 0, time.Time{}, false},
		{"a timer before the oldest answer's end", timerAndAnswers, retain, time.Unix(1, 0), true},
		{"kept answers cut off: due at once", answers[:len(answers)-3], retain, time.Unix(0, 0), true},
		{"two timers", with, 0, time.Unix(1, 0), true},
		{"no timer", without, retain, time.Time{}, false},
		{"a timer, the rest cut off: due at once", with[:6], 0, time.Unix(0, 0), true},
		{"cut inside the state", with[:2], 0, time.Time{}, false},
		{"empty", nil, 0, time.Time{}, false},
		{"a newer format", append([]byte{recordVersionPending + 1}, with[1:]...), 0, time.Time{}, false},
		{"a state longer than the record", []byte{recordVersion, 0x7f, 1}, 0, time.Time{}, false},
	} {
		due, got := RecordWakeDue(c.rec, c.retain)
		if got != c.want || !due.Equal(c.due) {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, due, got, c.due, c.want)
		}
	}
}

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func TestARecordRoundTripsItsKeptAnswers(t *testing.T) {
	kept := []retained{
		{key: "pay-1", hash: [32]byte{1, 2, 3}, at: time.Unix(1700000000, 7).UnixNano(), rid: host.NamedRequestID("r1"), kind: retainedReply, body: []byte{0x2a}},
		{key: "pay-2", at: time.Unix(1700000001, 0).UnixNano(), rid: host.NamedRequestID("r2"), kind: retainedDeclared, name: "declined", body: []byte{0xc0}, text: "declined"},
		{key: "pay-3", at: time.Unix(1700000002, 0).UnixNano(), kind: retainedFailed, text: "boom"},
	}
	rec := []byte{recordVersionKept}
	rec = appendString(rec, "\x2a")
	rec = append(rec, 0) // no timer
	rec = appendRetained(rec, kept)
	s, _, got, err := decodeRecord[int](nil, rec)
	if err != nil || s != 42 {
		t.Fatalf("decode: %d %v", s, err)
	}
	if len(got) != len(kept) {
		t.Fatalf("decoded %d kept answers, want %d", len(got), len(kept))
	}
	for i := range kept {
		w, g := kept[i], got[i]
		if g.key != w.key || g.hash != w.hash || g.at != w.at || g.rid != w.rid || g.kind != w.kind ||
			!bytes.Equal(g.body, w.body) || g.name != w.name || g.text != w.text {
			t.Fatalf("kept answer %d decoded as %+v, want %+v", i, g, w)
		}
	}
	for i := 1; i < len(rec); i++ {
		if _, _, _, err := decodeRecord[int](nil, rec[:i]); err == nil {
			t.Fatalf("a record with kept answers cut at %d bytes decoded", i)
		}
	}
	bad := slices.Clone(rec)
	bad = append(bad[:len(bad)-len(appendRetained(nil, kept))], appendRetained(nil, []retained{{key: "k", kind: 9}})...)
	if _, _, _, err := decodeRecord[int](nil, bad); !errors.Is(err, errRecord) {
		t.Fatalf("a kept answer of an unknown kind: %v, want errRecord", err)
	}
}

func TestKeptAnswersAreBoundedByAgeAndCount(t *testing.T) {
	now := time.Unix(1700000000, 0)
	var rs []retained
	rs = append(rs, retained{key: "old", at: now.Add(-retainFor - time.Second).UnixNano()})
	for i := range maxRetained + 5 {
		rs = append(rs, retained{key: fmt.Sprint(i), at: now.Add(time.Duration(i)).UnixNano()})
	}
	rs = pruneRetained(rs, now.Add(maxRetained+5), retainFor)
	if len(rs) != maxRetained {
		t.Fatalf("kept %d answers, want at most %d", len(rs), maxRetained)
	}
	if rs[0].key != "5" || rs[len(rs)-1].key != fmt.Sprint(maxRetained+4) {
		t.Fatalf("kept %s..%s, want the newest %d (5..%d)", rs[0].key, rs[len(rs)-1].key, maxRetained, maxRetained+4)
	}
}

func TestARecordRoundTripsItsPendingRequests(t *testing.T) {
	kept := []retained{
		{key: "pay-1", hash: [32]byte{9}, at: time.Unix(1700000000, 0).UnixNano(), rid: host.NamedRequestID("r1"), kind: retainedPending, attempt: 3},
		{key: "pay-2", at: time.Unix(1700000001, 0).UnixNano(), rid: host.NamedRequestID("r2"), kind: retainedReply, body: []byte{0x2a}},
	}
	body := appendRetained(nil, kept)
	rec := append(appendString([]byte{recordVersionPending}, "\x2a"), 0)
	_, _, got, err := decodeRecord[int](nil, append(rec, body...))
	if err != nil || len(got) != 2 {
		t.Fatalf("decode: %v %v", got, err)
	}
	if g := got[0]; !g.pending() || g.attempt != 3 || g.key != "pay-1" || g.hash != kept[0].hash || len(g.body) != 0 {
		t.Fatalf("the pending request decoded as %+v", g)
	}
	// Format 2 holds no pending request, and an attempt must be a
	// positive uvarint, whole.
	rec2 := append(appendString([]byte{recordVersionKept}, "\x2a"), 0)
	if _, _, _, err := decodeRecord[int](nil, append(rec2, body...)); !errors.Is(err, errRecord) {
		t.Fatalf("a pending request in a format 2 record: %v, want errRecord", err)
	}
	for _, attempt := range [][]byte{{}, {0}, {1, 1}, {0x80}} {
		bad := binary.AppendUvarint(nil, 1)
		bad = appendString(bad, "k")
		bad = append(bad, make([]byte, 32)...)
		bad = binary.AppendVarint(bad, 1)
		bad = appendString(bad, "")
		bad = append(bad, retainedPending)
		bad = appendString(bad, string(attempt))
		bad = appendString(bad, "")
		bad = appendString(bad, "")
		if _, _, _, err := decodeRecord[int](nil, append(slices.Clone(rec), bad...)); !errors.Is(err, errRecord) {
			t.Fatalf("a pending request whose attempt is % x: %v, want errRecord", attempt, err)
		}
	}
}

func TestPendingRequestsArePrunedOnlyByAge(t *testing.T) {
	now := time.Unix(1700000000, 0)
	rs := []retained{
		{key: "pending", at: now.Add(-retainFor / 2).UnixNano(), kind: retainedPending, attempt: 1},
		{key: "forgotten", at: now.Add(-retainFor - time.Second).UnixNano(), kind: retainedPending, attempt: 1},
	}
	for i := range maxRetained + 5 {
		rs = append(rs, retained{key: fmt.Sprint(i), at: now.Add(time.Duration(i)).UnixNano(), kind: retainedReply, body: make([]byte, 1024)})
	}
	rs = pruneRetained(rs, now.Add(maxRetained+5), retainFor)
	if !slices.ContainsFunc(rs, func(r retained) bool { return r.key == "pending" && r.pending() }) {
		t.Fatal("a pending request beyond the count and byte budgets was pruned")
	}
	if slices.ContainsFunc(rs, func(r retained) bool { return r.key == "forgotten" }) {
		t.Fatal("a pending request older than retainFor was kept")
	}
	total := 0
	for _, r := range rs {
		total += r.size()
	}
	if len(rs) > maxRetained || total > maxRetainedBytes+rs[len(rs)-1].size() {
		t.Fatalf("kept %d answers of %d bytes; the budgets are %d and %d", len(rs), total, maxRetained, maxRetainedBytes)
	}
}
