package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/troupe-go/troupe/internal/host"
)

func TestARecordOfANewerFormatIsRefused(t *testing.T) {
	_, _, err := decodeRecord[int](nil, []byte{recordVersion + 1, 1, 0x05, 0})
	if !errors.Is(err, errRecord) {
		t.Fatalf("a record of format %d: %v, want errRecord", recordVersion+1, err)
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
	s, timers, err := decodeRecord[int](nil, rec)
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
		if _, _, err := decodeRecord[int](nil, rec[:i]); err == nil {
			t.Fatalf("a record cut at %d bytes decoded", i)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{recordVersion, 1, 0x2a, 0})
	f.Add([]byte{recordVersion, 1, 0x2a, 1, 1, 't', 2, 2, 1, 'm', 1, 0xc0})
	h := host.New(host.Settings{})
	defer h.Close(f.Context())
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = decodeRecord[map[string]int](h, b)
	})
}

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }
