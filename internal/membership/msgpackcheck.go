package membership

import "github.com/troupe-go/troupe/internal/msgpackcheck"

// maxNesting bounds how deeply msgpack containers may nest in a membership
// message; the real format nests four levels.
const maxNesting = 16

// checkMsgpack refuses a message whose declared lengths exceed the bytes
// present: the msgpack library trusts an array header when it allocates
// a slice of structs, so a five-byte input could otherwise ask for
// gigabytes.
func checkMsgpack(b []byte) error { return msgpackcheck.Check(b, maxNesting) }
