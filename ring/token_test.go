package ring

import (
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"
)

// The expected values below were computed with Python's hashlib from the
// encodings in doc.go, not with this package: they pin the documented inputs
// and show that a client in another language computes the same ring. If one
// of these tests fails, the ring changed for every deployed node and Client.

func TestKeyTokenMatchesDocumentedDigest(t *testing.T) {
	cases := []struct {
		actorType, key string
		want           Token
	}{
		{"counter", "page-views", 0x640316e0dc1f435c},
		{"ab", "c", 0xdbfe2489d9525ced},
		{"a", "bc", 0xc7bc6f92b9756e8c},
		{"", "", 0xab46d62e640b5290},
		{"counter", strings.Repeat("x", 300), 0x2aab074b72f57ae0},
	}
	for _, c := range cases {
		if got := KeyToken(c.actorType, c.key); got != c.want {
			t.Errorf("KeyToken(%q, %.20q) = %#016x, want the documented %#016x", c.actorType, c.key, uint64(got), uint64(c.want))
		}
	}
}

func TestVirtualNodeTokensMatchDocumentedDigest(t *testing.T) {
	cases := []struct {
		m     NodeID
		index int
		want  Token
	}{
		{NodeID{"10.0.0.5:7400", 1}, 0, 0x96ea74e6e103c549},
		{NodeID{"10.0.0.5:7400", 1}, 1, 0xe36afe335ac7eabf},
		{NodeID{"10.0.0.5:7400", 1}, 127, 0x0bbbc052f38dcbda},
		{NodeID{"10.0.0.5:7400", 2}, 0, 0x1454a96ea9472ef1},
	}
	for _, c := range cases {
		toks := appendVNodeTokens(nil, c.m)
		if len(toks) != VirtualNodes {
			t.Fatalf("member %v has %d virtual nodes, want %d", c.m, len(toks), VirtualNodes)
		}
		if got := toks[c.index]; got != c.want {
			t.Errorf("virtual node %d of %v = %#016x, want the documented %#016x", c.index, c.m, uint64(got), uint64(c.want))
		}
	}
}

func TestVersionMatchesDocumentedDigest(t *testing.T) {
	r := New([]NodeID{{"10.0.0.5:7400", 1}, {"10.0.0.4:7400", 7}})
	if got, want := r.Version().String(), "4fb5f8c69575329f40ac7fa806c08eed"; got != want {
		t.Errorf("version of {10.0.0.4:7400#7, 10.0.0.5:7400#1} = %s, want the documented %s", got, want)
	}
	if got, want := New(nil).Version().String(), "4ab03e1d7d9e6e9192405f1bd3dbaed1"; got != want {
		t.Errorf("version of the empty ring = %s, want the documented %s", got, want)
	}
}

func TestKeyTokenIsTheDigestOfTheDocumentedBytes(t *testing.T) {
	// "k", len("ab")=2 as 8 bytes big-endian, "ab", len("c")=1, "c".
	in := []byte{'k', 0, 0, 0, 0, 0, 0, 0, 2, 'a', 'b', 0, 0, 0, 0, 0, 0, 0, 1, 'c'}
	sum := blake2b.Sum512(in)
	want := Token(binary.BigEndian.Uint64(sum[:8]))
	if got := KeyToken("ab", "c"); got != want {
		t.Errorf("KeyToken(\"ab\", \"c\") = %#016x, want BLAKE2b-512 of the documented bytes %#016x", uint64(got), uint64(want))
	}
}

func TestKeyTokenSeparatesActorTypeFromKey(t *testing.T) {
	if KeyToken("ab", "c") == KeyToken("a", "bc") {
		t.Error(`("ab", "c") and ("a", "bc") got the same token; the length prefixes must keep them apart`)
	}
}

func TestKeyTokenIsAllocationFreeForShortKeys(t *testing.T) {
	key := strings.Repeat("k", 239-len("counter"))
	if allocs := testing.AllocsPerRun(100, func() { KeyToken("counter", key) }); allocs != 0 {
		t.Errorf("KeyToken with 239 bytes of type and key allocated %v times per call, want 0", allocs)
	}
}

func TestKeyTokenOfLongKeysAgreesAcrossTheStackBufferLimit(t *testing.T) {
	for n := 230; n < 250; n++ {
		key := strings.Repeat("z", n)
		want := digestToken(appendKeyInput(nil, "counter", key))
		if got := KeyToken("counter", key); got != want {
			t.Errorf("KeyToken with a %d-byte key = %#016x, want %#016x", n, uint64(got), uint64(want))
		}
	}
}

func TestRestartedProcessGetsOtherPositions(t *testing.T) {
	before := appendVNodeTokens(nil, NodeID{"10.0.0.5:7400", 1})
	after := appendVNodeTokens(nil, NodeID{"10.0.0.5:7400", 2})
	shared := map[Token]bool{}
	for _, tok := range before {
		shared[tok] = true
	}
	for _, tok := range after {
		if shared[tok] {
			t.Errorf("incarnations 1 and 2 of one address share position %#016x; a restart must get fresh positions", uint64(tok))
		}
	}
}
