package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/host"
)

func TestARecordOfANewerFormatIsRefused(t *testing.T) {
	_, _, _, err := decodeRecord[int](nil, []byte{recordVersionNewest + 1, 1, 0x05, 0})
	if !errors.Is(err, errRecord) {
		t.Fatalf("a record of format %d: %v, want errRecord", recordVersionNewest+1, err)
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
	answers := []retained{
		{key: "k", at: time.Unix(1, 0).UnixNano(), rid: host.NamedRequestID("r"), kind: retainedReply, body: []byte{0x01}},
		{key: "d", at: time.Unix(2, 0).UnixNano(), rid: host.MadeRequestID(7, 9), kind: retainedDeclared, name: "n", text: "t"},
	}
	pending := []retained{{key: "k", at: time.Unix(1, 0).UnixNano(), rid: host.NamedRequestID("r"), kind: retainedPending, attempt: 2}}
	f.Add(appendRetained([]byte{recordVersionCompact, 1, 0x2a, 0}, answers))
	f.Add(appendRetained([]byte{recordVersionCompact, 1, 0x2a, 0}, pending))
	f.Add(appendRetained([]byte{recordVersionHeld, 1, 0x2a, 0}, answers))
	f.Add(appendPaged(appendRetained([]byte{recordVersionPaged, 1, 0x2a, 0}, answers), pagesOf(answers)))
	f.Add(appendPaged(appendRetained([]byte{recordVersionPaged, 1, 0x2a, 0}, nil), pagesOf(answers)))
	f.Add(appendRetainedFormat3([]byte{recordVersionKept, 1, 0x2a, 0}, answers))
	f.Add(appendRetainedFormat3([]byte{recordVersionPending, 1, 0x2a, 0}, pending))
	h := host.New(host.Settings{})
	defer h.Close(f.Context())
	f.Fuzz(func(t *testing.T, b []byte) {
		_, timers, kept, paged, err := decodeRecordPaged[map[string]int](h, b)
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
		if paged.answers > 0 && paged.due < math.MaxInt64-int64(retain) {
			first = min(first, paged.due+int64(retain))
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
	without := append(appendString([]byte{recordVersionCompact}, "\x2a"), 0)
	answers := appendRetained(slices.Clone(without), []retained{
		{key: "k1", at: time.Unix(5, 0).UnixNano(), kind: retainedReply, body: []byte{1}},
		{key: "k2", at: time.Unix(3, 0).UnixNano(), kind: retainedFailed, text: "boom"},
	})
	const retain = 10 * time.Second
	legacy := appendRetainedFormat3(append(appendString([]byte{recordVersionKept}, "\x2a"), 0), []retained{
		{key: "k1", at: time.Unix(4, 0).UnixNano(), kind: retainedReply, body: []byte{1}},
	})
	timerAndAnswers := append([]byte{recordVersionCompact}, with[1:]...)
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
		{"kept answers in format 2", legacy, retain, time.Unix(14, 0), true},
		{"a timer before the oldest answer's end", timerAndAnswers, retain, time.Unix(1, 0), true},
		{"kept answers cut off: due at once", answers[:len(answers)-3], retain, time.Unix(0, 0), true},
		{"two timers", with, 0, time.Unix(1, 0), true},
		{"no timer", without, retain, time.Time{}, false},
		{"a timer, the rest cut off: due at once", with[:6], 0, time.Unix(0, 0), true},
		{"cut inside the state", with[:2], 0, time.Time{}, false},
		{"empty", nil, 0, time.Time{}, false},
		{"a newer format", append([]byte{recordVersionNewest + 1}, with[1:]...), 0, time.Time{}, false},
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
		{key: "pay-1", hash: requestSum{1, 2, 3}, at: time.Unix(1700000000, 7e6).UnixNano(), rid: host.NamedRequestID("r1"), kind: retainedReply, body: []byte{0x2a}},
		{key: "pay-2", at: time.Unix(1700000001, 0).UnixNano(), rid: host.MadeRequestID(1<<63, 5), kind: retainedDeclared, name: "declined", body: []byte{0xc0}, text: "declined"},
		{key: "pay-3", at: time.Unix(1700000002, 0).UnixNano(), kind: retainedFailed, text: "boom"},
		// A named id that reads as a made one shows alike, and stays named.
		{key: "pay-4", at: time.Unix(-2, 0).UnixNano(), rid: host.NamedRequestID(strings.Repeat("0a", 16)), kind: retainedNoReply},
	}
	rec := []byte{recordVersionCompact}
	rec = appendString(rec, "\x2a")
	rec = append(rec, 0) // no timer
	rec = appendRetained(rec, kept)
	s, _, got, err := decodeRecord[int](nil, rec)
	if err != nil || s != 42 {
		t.Fatalf("decode: %d %v", s, err)
	}
	sameAnswers(t, got, kept)
	for i := 1; i < len(rec); i++ {
		if _, _, _, err := decodeRecord[int](nil, rec[:i]); err == nil {
			t.Fatalf("a record with kept answers cut at %d bytes decoded", i)
		}
	}
	header := len(rec) - len(appendRetained(nil, kept))
	for _, c := range []struct {
		name string
		bad  []byte
	}{
		{"an unknown kind", appendRetained(nil, []retained{{key: "k", kind: 9}})},
		// Count, key, sum, time and the id's tag take 21 bytes; then the
		// id's 16 (the last is the count 1), or the kind and the fields.
		{"a made request id of zeros", patched(appendRetained(nil, []retained{{key: "k", rid: host.MadeRequestID(0, 1), kind: retainedNoReply}}), 21+15, 0)},
		{"unknown fields", patched(appendRetained(nil, []retained{{key: "k", kind: retainedNoReply}}), 22, 8)},
		{"an empty body marked present", append(patched(appendRetained(nil, []retained{{key: "k", kind: retainedNoReply}}), 22, keptBody), 0)},
		{"a time out of range", appendRetainedTime(math.MaxInt64)},
	} {
		if _, _, _, err := decodeRecord[int](nil, append(slices.Clone(rec[:header]), c.bad...)); !errors.Is(err, errRecord) {
			t.Errorf("a kept answer with %s: %v, want errRecord", c.name, err)
		}
	}
}

// patched is b with its byte at i set to v.
func patched(b []byte, i int, v byte) []byte {
	if b[i] == v {
		panic("nothing patched")
	}
	b[i] = v
	return b
}

// appendRetainedTime is one kept answer (no reply) dated ms milliseconds
// after the epoch, as format 4 writes it.
func appendRetainedTime(ms int64) []byte {
	b := []byte{1}
	b = appendString(b, "k")
	b = append(b, make([]byte, len(requestSum{}))...)
	b = binary.AppendVarint(b, ms)
	return append(b, 0, retainedNoReply, 0)
}

// sameAnswers fails t unless got are want, field by field.
func sameAnswers(t *testing.T, got, want []retained) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("decoded %d kept answers, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.key != w.key || g.hash != w.hash || g.at != w.at || g.rid != w.rid || g.kind != w.kind ||
			!bytes.Equal(g.body, w.body) || g.name != w.name || g.text != w.text || g.attempt != w.attempt {
			t.Fatalf("kept answer %d decoded as %+v, want %+v", i, g, w)
		}
	}
}

// appendRetainedFormat3 appends rs as records of formats 2 and 3 held
// them, which a binary still reads.
func appendRetainedFormat3(b []byte, rs []retained) []byte {
	b = binary.AppendUvarint(b, uint64(len(rs)))
	for _, r := range rs {
		b = appendString(b, r.key)
		b = append(b, r.hash[:]...)
		b = append(b, make([]byte, 32-len(r.hash))...) // the rest of the sum
		b = binary.AppendVarint(b, r.at)
		b = appendString(b, r.rid.String())
		b = append(b, r.kind)
		body := r.body
		if r.pending() {
			body = binary.AppendUvarint(nil, r.attempt)
		}
		b = appendString(b, string(body))
		b = appendString(b, r.name)
		b = appendString(b, r.text)
	}
	return b
}

func TestRecordsOfFormatsTwoAndThreeAreStillRead(t *testing.T) {
	answers := []retained{
		{key: "pay-1", hash: requestSum{1, 2, 3}, at: time.Unix(1700000000, 7).UnixNano(), rid: host.NamedRequestID("r1"), kind: retainedReply, body: []byte{0x2a}},
		{key: "pay-2", at: time.Unix(1700000001, 0).UnixNano(), rid: host.MadeRequestID(1<<63, 5), kind: retainedDeclared, name: "declined", body: []byte{0xc0}, text: "declined"},
		{key: "pay-3", at: time.Unix(1700000002, 0).UnixNano(), kind: retainedFailed, text: "boom"},
	}
	pending := append(slices.Clone(answers), retained{key: "pay-4", hash: requestSum{9}, at: time.Unix(1700000003, 0).UnixNano(), rid: host.NamedRequestID("r4"), kind: retainedPending, attempt: 3})
	for _, c := range []struct {
		format byte
		kept   []retained
	}{{recordVersionKept, answers}, {recordVersionPending, pending}} {
		rec := append(appendString([]byte{c.format}, "\x2a"), 0)
		rec = appendRetainedFormat3(rec, c.kept)
		s, _, got, err := decodeRecord[int](nil, rec)
		if err != nil || s != 42 {
			t.Fatalf("format %d: %d %v", c.format, s, err)
		}
		sameAnswers(t, got, c.kept)
		// Written again, it is format 4, and reads as the same.
		again := appendRetained(append(appendString([]byte{recordVersionCompact}, "\x2a"), 0), got)
		_, _, got, err = decodeRecord[int](nil, again)
		if err != nil {
			t.Fatalf("format %d written again as format 4: %v", c.format, err)
		}
		for i := range got {
			got[i].at = c.kept[i].at // format 4 keeps milliseconds
		}
		sameAnswers(t, got, c.kept)
		if len(again) >= len(rec) {
			t.Errorf("format %d took %d bytes, format 4 %d: want fewer", c.format, len(rec), len(again))
		}
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
	// Within the slack, only the old one goes.
	if len(rs) != maxRetained+5 || rs[0].key != "0" {
		t.Fatalf("kept %d answers from %s, want the %d within the retention", len(rs), rs[0].key, maxRetained+5)
	}
	for i := maxRetained + 5; i <= maxRetainedHeld; i++ {
		rs = append(rs, retained{key: fmt.Sprint(i), at: now.Add(time.Duration(i)).UnixNano()})
		rs = pruneRetained(rs, now.Add(time.Duration(i)), retainFor)
	}
	// One past the slack: back to the budget, the newest kept.
	if len(rs) != maxRetained {
		t.Fatalf("kept %d answers, want at most %d", len(rs), maxRetained)
	}
	if first, last := maxRetainedHeld-maxRetained+1, maxRetainedHeld; rs[0].key != fmt.Sprint(first) || rs[len(rs)-1].key != fmt.Sprint(last) {
		t.Fatalf("kept %s..%s, want the newest %d (%d..%d)", rs[0].key, rs[len(rs)-1].key, maxRetained, first, last)
	}
}

func TestARecordRoundTripsItsPendingRequests(t *testing.T) {
	kept := []retained{
		{key: "pay-1", hash: requestSum{9}, at: time.Unix(1700000000, 0).UnixNano(), rid: host.NamedRequestID("r1"), kind: retainedPending, attempt: 3},
		{key: "pay-2", at: time.Unix(1700000001, 0).UnixNano(), rid: host.NamedRequestID("r2"), kind: retainedReply, body: []byte{0x2a}},
	}
	body := appendRetained(nil, kept)
	rec := append(appendString([]byte{recordVersionCompact}, "\x2a"), 0)
	_, _, got, err := decodeRecord[int](nil, append(slices.Clone(rec), body...))
	if err != nil || len(got) != 2 {
		t.Fatalf("decode: %v %v", got, err)
	}
	if g := got[0]; !g.pending() || g.attempt != 3 || g.key != "pay-1" || g.hash != kept[0].hash || len(g.body) != 0 {
		t.Fatalf("the pending request decoded as %+v", g)
	}
	// Format 2 holds no pending request.
	rec2 := append(appendString([]byte{recordVersionKept}, "\x2a"), 0)
	if _, _, _, err := decodeRecord[int](nil, appendRetainedFormat3(rec2, kept)); !errors.Is(err, errRecord) {
		t.Fatalf("a pending request in a format 2 record: %v, want errRecord", err)
	}
	// An attempt is a positive uvarint, whole, in every format.
	rec3 := append(appendString([]byte{recordVersionPending}, "\x2a"), 0)
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
		if _, _, _, err := decodeRecord[int](nil, append(slices.Clone(rec3), bad...)); !errors.Is(err, errRecord) {
			t.Fatalf("a pending request whose attempt is % x (format 3): %v, want errRecord", attempt, err)
		}
		bad = binary.AppendUvarint(nil, 1)
		bad = appendString(bad, "k")
		bad = append(bad, make([]byte, len(requestSum{}))...)
		bad = binary.AppendVarint(bad, 1)
		bad = append(bad, 0, retainedPending, keptBody)
		bad = appendString(bad, string(attempt))
		if _, _, _, err := decodeRecord[int](nil, append(slices.Clone(rec), bad...)); !errors.Is(err, errRecord) {
			t.Fatalf("a pending request whose attempt is % x (format 4): %v, want errRecord", attempt, err)
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
	if len(rs) > maxRetainedHeld || total > maxRetainedBytes+maxRetainedGrowth {
		t.Fatalf("kept %d answers of %d bytes; the budgets are %d and %d with their slack", len(rs), total, maxRetainedHeld, maxRetainedBytes+maxRetainedGrowth)
	}
}

// Format 5 holds the answers as format 4 does, up to the budget's slack
// (maxRetainedHeld); format 4 held at most maxRetained.
func TestAFormatHoldsAtMostItsCountOfAnswers(t *testing.T) {
	answers := func(n int) []retained {
		rs := make([]retained, n)
		for i := range rs {
			rs[i] = retained{key: fmt.Sprint(i), at: time.Unix(1700000000, 0).UnixNano(), kind: retainedNoReply}
		}
		return rs
	}
	for _, c := range []struct {
		format byte
		n      int
		ok     bool
	}{
		{recordVersionCompact, maxRetained, true},
		{recordVersionCompact, maxRetained + 1, false},
		{recordVersionHeld, maxRetainedHeld, true},
		{recordVersionHeld, maxRetainedHeld + 1, false},
	} {
		rec := appendRetained(append(appendString([]byte{c.format}, "\x2a"), 0), answers(c.n))
		_, _, got, err := decodeRecord[int](nil, rec)
		if c.ok && (err != nil || len(got) != c.n) {
			t.Errorf("format %d with %d answers: %d read, %v", c.format, c.n, len(got), err)
		}
		if !c.ok && !errors.Is(err, errRecord) {
			t.Errorf("format %d with %d answers: %v, want errRecord", c.format, c.n, err)
		}
	}
}

// A record copies each kept answer as it wrote it the first time; an
// entry changed in place (a request given up as lost, an answer too
// large to keep) is written anew.
func TestARecordWritesAnAnswerChangedInPlaceAnew(t *testing.T) {
	now := time.Unix(1700000000, 0)
	kinds := func(rs []retained) map[string]byte {
		t.Helper()
		rec := append(append(appendString([]byte{recordVersionHeld}, "\x2a"), 0), appendRetained(nil, rs)...)
		_, _, got, err := decodeRecord[int](nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]byte{}
		for _, r := range got {
			out[r.key] = r.kind
		}
		return out
	}
	var orphans []retained
	for i := range maxPending {
		orphans = append(orphans, retained{key: fmt.Sprintf("o%d", i), at: now.Add(time.Duration(i) * time.Second).UnixNano(), kind: retainedPending, attempt: 1})
	}
	first := appendRetained(nil, orphans)
	if again := appendRetained(nil, orphans); !bytes.Equal(again, first) {
		t.Fatal("a record written again from its entries differs")
	}
	loseOrphans(orphans)
	if k := kinds(orphans); k["o0"] != retainedLost || k["o1"] != retainedPending {
		t.Errorf("the oldest orphan reads as kind %d, the next as %d; want lost (%d) and pending (%d)", k["o0"], k["o1"], retainedLost, retainedPending)
	}
	big := []retained{
		{key: "small", at: now.UnixNano(), kind: retainedReply, body: []byte{1}},
		{key: "big", at: now.UnixNano(), kind: retainedReply, body: make([]byte, maxRetainedBytes+maxRetainedGrowth)},
	}
	appendRetained(nil, big)
	big = pruneRetained(big, now, retainFor)
	if k := kinds(big); k["big"] != retainedTooLarge {
		t.Errorf("the answer too large to keep reads as kind %d, want %d", k["big"], retainedTooLarge)
	}
}
