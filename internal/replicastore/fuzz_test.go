package replicastore

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/troupe-go/troupe/internal/replica"
	"github.com/troupe-go/troupe/replication"
	"github.com/troupe-go/troupe/ring"
)

func FuzzDecodeValue(f *testing.F) {
	k := replica.Key{Type: "t", ID: "k"}
	slot := replica.Slot{Kind: replica.KindState}
	key := appendKey(nil, k, slot)
	f.Add(encodeValue(key, rec("a", replica.KindState, 3, "value")))
	f.Add(encodeValue(key, replica.Record{Kind: replica.KindPromise}))
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeValue(key, k, slot, b)
		if err != nil {
			if !errors.Is(err, replication.ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := decodeValue(key, k, slot, encodeValue(key, r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("a decoded record does not round-trip: %+v, %v", again, err)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(appendKey(nil, replica.Key{Type: "counter", ID: "a"}, replica.Slot{Kind: replica.KindState}))
	f.Add(appendKey(nil, replica.Key{Type: "counter", ID: "a"}, replica.Slot{Kind: replica.KindContinuity, Name: "req-1"}))
	f.Add([]byte("r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, slot, err := decodeKey(b)
		if err != nil {
			if !errors.Is(err, replication.ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if got := appendKey(nil, k, slot); string(got) != string(b) {
			t.Fatalf("key %x decoded to %v/%v which encodes as %x", b, k, slot, got)
		}
	})
}

func FuzzDecodeReceiving(f *testing.F) {
	f.Add(encodeReceiving(nil))
	f.Add(encodeReceiving([]ring.Range{{}}))
	f.Add(encodeReceiving([]ring.Range{{Start: 10, End: 20}, {Start: 30, End: 5}}))
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ranges, err := decodeReceiving(b)
		if err != nil {
			if !errors.Is(err, replication.ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := decodeReceiving(encodeReceiving(ranges))
		if err != nil || !slices.Equal(again, ranges) {
			t.Fatalf("decoded ranges %v do not round-trip: %v, %v", ranges, again, err)
		}
	})
}
