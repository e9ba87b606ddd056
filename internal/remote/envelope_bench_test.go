package remote

import (
	"strconv"
	"testing"
)

// benchBatch returns n envelopes as a batch carries them: tells to one
// key (continued), tells to a key each, or asks to a key each.
func benchBatch(n int, shape string) [][]byte {
	var enc tellHead
	out := make([][]byte, 0, n)
	for i := range n {
		e := envelope{kind: kindTell, token: 7, typ: "counter", key: "key-1", name: "main.add", body: []byte{0x81, 0xa1, 'N', 1}}
		switch shape {
		case "keys":
			e.key = "key-" + strconv.Itoa(i)
		case "asks":
			e.kind, e.id, e.ttl, e.key = kindAsk, uint64(i+1), 1e9, "key-"+strconv.Itoa(i)
		}
		out = append(out, e.appendNextBody(nil, &enc, nil, nil))
	}
	return out
}

// BenchmarkDecodeEnvelopes decodes runs of envelopes as a peer's inbox
// worker does (the envelope before each at hand), and asks alone as
// stage one does (none).
func BenchmarkDecodeEnvelopes(b *testing.B) {
	for _, shape := range []string{"one-key", "keys", "asks", "asks-alone"} {
		b.Run(shape, func(b *testing.B) {
			batch := benchBatch(256, shape)
			if shape == "asks-alone" {
				batch = benchBatch(256, "asks")
			}
			b.ReportAllocs()
			for b.Loop() {
				var prev tellHead
				p := &prev
				if shape == "asks-alone" {
					p = nil
				}
				for _, env := range batch {
					var e envelope
					if err := e.decode(env, p); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/envelope")
		})
	}
}
