package noderecord

import "github.com/troupe-go/troupe/internal/msgpackcheck"

// maxNesting bounds how deeply containers may nest in an encoded record;
// the format itself nests two levels (record, counters or labels).
const maxNesting = 8

// checkShape refuses an encoded record whose declared lengths exceed the
// bytes present, before the msgpack library sizes allocations from them.
func checkShape(b []byte) error { return msgpackcheck.Check(b, maxNesting) }
