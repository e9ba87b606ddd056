package noderecord

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// ordered encodes a msgpack map with its entries in the order given.
func ordered(t testing.TB, kv ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	if err := e.EncodeMapLen(len(kv) / 2); err != nil {
		t.Fatal(err)
	}
	for _, v := range kv {
		if err := e.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// plus returns the minimal encoding with one more entry, written raw.
func plus(t testing.TB, entry ...[]byte) []byte {
	body := ordered(t, minimal()...)[1:]
	return bytes.Join(append([][]byte{{0x80 | byte(len(minimal())/2+1)}, body}, entry...), nil)
}

// str is a msgpack fixstr.
func str(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }

// minimal is the smallest valid encoding, as a list of entries.
func minimal() []any {
	return []any{"v", 1, "cluster", "c", "node", "n", "role", "r", "incarnation", "i", "seq", 0}
}

func TestEncodeDecodeRoundTripsEveryField(t *testing.T) {
	for name, r := range map[string]Record{"full": full(), "largest": largest(), "minimal": {Cluster: "c", Node: "n", Role: "r", Incarnation: "i"}} {
		b, err := Encode(r)
		if err != nil {
			t.Fatalf("%s: Encode: %v", name, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: Decode: %v", name, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, r)
		}
	}
}

func TestTheLargestRecordEncodesWellWithinMaxEncodedBytes(t *testing.T) {
	b, err := Encode(largest())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxEncodedBytes/2 {
		t.Errorf("a record at every limit encodes to %d bytes, want at most half of %d", len(b), MaxEncodedBytes)
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	a, _ := Encode(largest())
	for range 20 {
		if b, _ := Encode(largest()); !bytes.Equal(a, b) {
			t.Fatal("two encodings of one record differ")
		}
	}
}

func TestEncodeRefusesAnInvalidRecord(t *testing.T) {
	r := full()
	r.Node = ""
	if _, err := Encode(r); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("Encode of a record without a node = %v, want ErrInvalidRecord", err)
	}
}

func TestDecodeTimesAreUTCMilliseconds(t *testing.T) {
	r := full()
	r.Started = r.Started.Add(999) // nanoseconds below a millisecond
	b, _ := Encode(r)
	got, _ := Decode(b)
	if !got.Started.Equal(full().Started) || got.Started.Location() != full().Started.Location() {
		t.Errorf("Started = %v, want %v", got.Started, full().Started)
	}
}

func TestDecodeRefusesInputOverMaxEncodedBytesBeforeReadingIt(t *testing.T) {
	b := ordered(t, append(minimal(), "padding", strings.Repeat("p", MaxEncodedBytes))...)
	_, err := Decode(b)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Decode of %d bytes = %v, want ErrTooLarge", len(b), err)
	}
}

func TestDecodeRefusesANewerFormatVersion(t *testing.T) {
	// A newer version may change any field's shape: the version is
	// checked before the rest, which is here not even a record.
	b := ordered(t, "v", FormatVersion+1, "cluster", []int{1, 2})
	_, err := Decode(b)
	if !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrMalformed) {
		t.Errorf("Decode of version %d = %v, want ErrUnsupportedVersion", FormatVersion+1, err)
	}
}

func TestDecodeSkipsAFieldItDoesNotKnow(t *testing.T) {
	b := ordered(t, append(minimal(), "later_field", map[string]any{"x": []int{1, 2}}, "counters", map[string]any{"later": 1})...)
	r, err := Decode(b)
	if err != nil || r.Node != "n" {
		t.Errorf("Decode with unknown fields = %+v, %v; want the record", r, err)
	}
}

func TestDecodeRefusesMalformedInput(t *testing.T) {
	withField := func(kv ...any) []byte { return ordered(t, append(minimal(), kv...)...) }
	tooMany := map[string]string{"one-more": "x"}
	for k, v := range largest().Labels {
		tooMany[k] = v
	}
	cases := map[string][]byte{
		"empty":              nil,
		"not a map":          {0x93, 1, 2, 3},
		"empty map":          {0x80},
		"version not first":  ordered(t, "cluster", "c", "v", 1),
		"version zero":       ordered(t, "v", 0),
		"version a string":   ordered(t, "v", "1"),
		"trailing bytes":     append(ordered(t, minimal()...), 0xc0),
		"truncated":          ordered(t, minimal()...)[:20],
		"missing node":       ordered(t, "v", 1, "cluster", "c", "role", "r", "incarnation", "i", "seq", 0),
		"field twice":        withField("node", "m"),
		"seq a string":       ordered(t, "v", 1, "cluster", "c", "node", "n", "role", "r", "incarnation", "i", "seq", "0"),
		"unknown health":     withField("health", 9),
		"labels a list":      withField("labels", []string{"a"}),
		"label twice":        plus(t, str("labels"), []byte{0x82, 0xa1, 'k', 0xa1, 'a', 0xa1, 'k', 0xa1, 'b'}),
		"too many labels":    withField("labels", tooMany),
		"invalid label":      withField("labels", map[string]string{"k": "\x01"}),
		"counter twice":      plus(t, str("counters"), []byte{0x82}, str("bytes"), []byte{1}, str("bytes"), []byte{2}),
		"huge declared list": {0x81, 0xa1, 'v', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"huge declared str":  {0x82, 0xa1, 'v', 1, 0xdb, 0x7f, 0xff, 0xff, 0xff},
		"nested deep":        bytes.Repeat([]byte{0x91}, 40),
		"lag overflows":      withField("counters", map[string]uint64{"replication_lag_ms": 1 << 62}),
		"node with slash":    ordered(t, "v", 1, "cluster", "c", "node", "a/b", "role", "r", "incarnation", "i", "seq", 0),
	}
	for name, b := range cases {
		_, err := Decode(b)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Decode = %v, want ErrMalformed", name, err)
		}
	}
}

func TestDecodeReportsAFieldOverItsLimitAsTooLargeAndMalformed(t *testing.T) {
	b := ordered(t, "v", 1, "cluster", "c", "node", strings.Repeat("n", MaxFieldBytes+1), "role", "r", "incarnation", "i", "seq", 0)
	_, err := Decode(b)
	var fe *FieldError
	if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrTooLarge) || !errors.As(err, &fe) || fe.Field != "Node" {
		t.Errorf("Decode of an oversized node = %v, want ErrMalformed and ErrTooLarge with a *FieldError naming Node", err)
	}
}
