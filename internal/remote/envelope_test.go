package remote

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/troupe-go/troupe/actor"
	"pgregory.net/rapid"
)

func TestEnvelopeRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := envelope{kind: rapid.SampledFrom([]uint8{kindTell, kindAsk, kindCancel, kindReply, kindSync, kindMembers, kindDrain, kindDrained}).Draw(t, "kind")}
		e.id = rapid.Uint64().Draw(t, "id")
		switch e.kind {
		case kindTell, kindAsk, kindDrain:
			e.token = rapid.Uint64().Draw(t, "token")
			e.typ = rapid.String().Draw(t, "typ")
			e.key = rapid.String().Draw(t, "key")
			e.name = rapid.String().Draw(t, "name")
			e.body = rapid.SliceOf(rapid.Byte()).Draw(t, "body")
			e.ttl = rapid.Int64Range(0, 1<<40).Draw(t, "ttl")
			e.hops = rapid.Uint8().Draw(t, "hops")
			e.chain = rapid.SliceOf(rapid.String()).Draw(t, "chain")
		case kindReply:
			if rapid.Bool().Draw(t, "failed") {
				e.err = &wireError{code: rapid.Uint8Range(1, 20).Draw(t, "code"), msg: rapid.String().Draw(t, "msg"),
					actor: rapid.String().Draw(t, "actor"), hint: rapid.String().Draw(t, "hint"), chain: rapid.SliceOf(rapid.String()).Draw(t, "echain")}
				if rapid.Bool().Draw(t, "nested") {
					e.err.cause = &wireError{code: codeCycle, msg: "inner"}
				}
			} else {
				e.body = rapid.SliceOf(rapid.Byte()).Draw(t, "body")
			}
		case kindMembers:
			e.body = rapid.SliceOf(rapid.Byte()).Draw(t, "body")
		}
		got, err := decodeEnvelope(e.encode())
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		norm := func(e envelope) envelope {
			if len(e.body) == 0 {
				e.body = nil
			}
			if len(e.chain) == 0 {
				e.chain = nil
			}
			if e.err != nil && len(e.err.chain) == 0 {
				e.err.chain = nil
			}
			return e
		}
		if !reflect.DeepEqual(norm(got), norm(e)) {
			t.Fatalf("got %+v, want %+v", got, e)
		}
	})
}

func TestDecodeEnvelopeRefusesBadInput(t *testing.T) {
	good := (&envelope{kind: kindAsk, id: 7, typ: "t", key: "k", body: []byte("x"), ttl: 5}).encode()
	for name, b := range map[string][]byte{
		"empty":          {},
		"version":        append([]byte{9}, good[1:]...),
		"unknown kind":   {envelopeVersion, 99},
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte{}, good...), 0),
		"huge length":    {envelopeVersion, kindMembers, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		if _, err := decodeEnvelope(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add((&envelope{kind: kindAsk, id: 7, typ: "t", key: "k", body: []byte("x"), ttl: 5, chain: []string{"a/b"}}).encode())
	f.Add((&envelope{kind: kindReply, id: 7, err: &wireError{code: codeFailed, msg: "m", cause: &wireError{code: codeCycle}}}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEnvelope(b)
		if err != nil {
			return
		}
		// What decodes encodes back to something that decodes the same.
		again, err := decodeEnvelope(e.encode())
		if err != nil || again.kind != e.kind || again.id != e.id || again.key != e.key {
			t.Fatalf("re-decode: %+v, %v", again, err)
		}
	})
}

func TestErrorsKeepTheirIdentityAcrossNodes(t *testing.T) {
	cycle := &actor.CycleError{Chain: []string{"a/1", "b/2", "a/1"}}
	for _, c := range []struct {
		err  error
		want []error
	}{
		{actor.ErrMailboxFull, []error{actor.ErrMailboxFull}},
		{actor.ErrUnknownActor, []error{actor.ErrUnknownActor}},
		{actor.ErrUnavailable, []error{actor.ErrUnavailable}},
		{context.DeadlineExceeded, []error{context.DeadlineExceeded}},
		{cycle, []error{actor.ErrAskCycle}},
		{&actor.FailedError{Actor: "a/1", Cause: cycle}, []error{actor.ErrActorFailed, actor.ErrAskCycle}},
		{&actor.FailedError{Actor: "a/1", Cause: errors.New("boom")}, []error{actor.ErrActorFailed}},
		{&notOwnerError{hint: "h:1"}, []error{errNotOwner}},
	} {
		e := envelope{kind: kindReply, id: 1, err: toWire(c.err)}
		got, err := decodeEnvelope(e.encode())
		if err != nil {
			t.Fatal(err)
		}
		back := fromWire(got.err, "node")
		for _, w := range c.want {
			if !errors.Is(back, w) {
				t.Errorf("%v came back as %v, which is not %v", c.err, back, w)
			}
		}
	}
}

func TestBatchFramingRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var want [][]byte
		var b []byte
		for _, size := range rapid.SliceOf(rapid.SampledFrom([]int{0, 1, 100, 127, 128, 300, 16383, 16384, 70000})).Draw(t, "sizes") {
			e := &envelope{kind: kindTell, key: "k", body: make([]byte, size)}
			b = e.appendFramed(b)
			want = append(want, e.encode())
		}
		var got [][]byte
		if err := splitBatch(b, func(p []byte) { got = append(got, p) }); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d envelopes, want %d", len(got), len(want))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("envelope %d differs", i)
			}
		}
	})
}

func FuzzSplitBatch(f *testing.F) {
	b := (&envelope{kind: kindAsk, id: 1, typ: "t", key: "k"}).appendFramed(nil)
	b = (&envelope{kind: kindCancel, id: 1}).appendFramed(b)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		_ = splitBatch(b, func(p []byte) {
			total += len(p)
			decodeEnvelope(p) // must not panic
		})
		if total > len(b) {
			t.Fatalf("split %d bytes out of %d", total, len(b))
		}
	})
}
