package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/troupe-go/troupe/actor"
	"github.com/troupe-go/troupe/internal/fault"
	"github.com/troupe-go/troupe/internal/host"
	"github.com/troupe-go/troupe/wire"
	"pgregory.net/rapid"
)

func TestEnvelopeRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := envelope{kind: rapid.SampledFrom([]uint8{kindTell, kindAsk, kindCancel, kindReply, kindSync, kindMembers, kindDrain, kindDrained, kindRetired, kindSyncSince, kindMembersV, kindVersion}).Draw(t, "kind")}
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
			if e.kind == kindAsk {
				switch rapid.IntRange(0, 2).Draw(t, "rid form") {
				case 1:
					e.rid = host.MadeRequestID(rapid.Uint64().Draw(t, "rid hi"), rapid.Uint64Min(1).Draw(t, "rid lo"))
				case 2:
					e.rid = host.NamedRequestID(rapid.StringMatching(`[!-~]{1,64}`).Draw(t, "rid name"))
				}
				e.idem = rapid.StringMatching(`[!-~]{0,255}`).Draw(t, "idempotency key")
			}
			if e.kind != kindDrain && rapid.Bool().Draw(t, "traced") {
				e.trace = &host.Trace{Parent: rapid.SampledFrom([]string{testParent, testFutureParent}).Draw(t, "traceparent"),
					State: rapid.SampledFrom([]string{"", "congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}).Draw(t, "tracestate")}
			}
		case kindReply:
			if rapid.Bool().Draw(t, "failed") {
				e.err = &wireError{code: rapid.Uint8Range(1, 20).Draw(t, "code"), msg: rapid.String().Draw(t, "msg"),
					actor: rapid.String().Draw(t, "actor"), hint: rapid.String().Draw(t, "hint"), chain: rapid.SliceOf(rapid.String()).Draw(t, "echain")}
				if e.err.code == codeDeclared {
					e.err.name, e.err.body = rapid.String().Draw(t, "name"), rapid.SliceOf(rapid.Byte()).Draw(t, "ebody")
				}
				if rapid.Bool().Draw(t, "nested") {
					e.err.cause = &wireError{code: codeCycle, msg: "inner"}
				}
			} else {
				e.body = rapid.SliceOf(rapid.Byte()).Draw(t, "body")
			}
		case kindMembers:
			e.body = rapid.SliceOf(rapid.Byte()).Draw(t, "body")
		case kindSyncSince:
			e.digest = rapid.StringMatching(`[!-~]{0,64}`).Draw(t, "digest")
		case kindMembersV:
			e.version = rapid.StringMatching(`[!-~]{0,64}`).Draw(t, "version")
			e.body = rapid.SliceOf(rapid.Byte()).Draw(t, "body")
		case kindVersion:
			e.version = rapid.StringMatching(`[!-~]{0,64}`).Draw(t, "version")
			e.digest = rapid.StringMatching(`[!-~]{0,64}`).Draw(t, "digest")
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
			if e.err != nil && len(e.err.body) == 0 {
				e.err.body = nil
			}
			return e
		}
		if !reflect.DeepEqual(norm(got), norm(e)) {
			t.Fatalf("got %+v, want %+v", got, e)
		}
	})
}

// Trace contexts for the tests: one of the W3C specification's
// examples, and one of a later version, which travels as it is.
const (
	testParent       = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	testFutureParent = "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more"
)

// A trace context is an optional addition: a tell or an ask without one
// is encoded byte for byte as before it existed, and one with it costs
// its two strings and nothing else.
func TestATraceContextCostsNothingToTheEnvelopesWithoutOne(t *testing.T) {
	for _, e := range []envelope{
		{kind: kindTell, token: 9, typ: "t", key: "k", name: "n", body: []byte("x")},
		{kind: kindAsk, id: 7, token: 9, typ: "t", key: "k", name: "n", body: []byte("x"), ttl: 5, rid: host.MadeRequestID(1, 2)},
	} {
		plain := e.encode()
		// The layout before trace contexts: version, kind, then the
		// fields, the ask's ending with its request id and idempotency key.
		want := []byte{envelopeVersion, e.kind, byte(e.id), 0, 0, 0, 0, 0, 0, 0, 9, 1, 't', 1, 'k', 1, 'n', 1, 'x', byte(e.ttl * 2), 0, 0}
		if e.kind == kindAsk {
			want = append(append(want, ridMade, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2), 0)
		}
		if !bytes.Equal(plain, want) {
			t.Fatalf("kind %d without a trace context: % x, want % x", e.kind, plain, want)
		}
		e.trace = &host.Trace{Parent: testParent, State: "rojo=1"}
		withTrace := e.encode()
		if withTrace[1] != e.kind|traced || len(withTrace) != len(plain)+1+len(testParent)+1+len("rojo=1") {
			t.Fatalf("kind %d with a trace context: kind byte %#x and %d bytes, want %#x and %d", e.kind, withTrace[1], len(withTrace),
				e.kind|traced, len(plain)+2+len(testParent)+len("rojo=1"))
		}
		got, err := decodeEnvelope(withTrace)
		if err != nil || got.kind != e.kind || got.trace == nil || *got.trace != *e.trace {
			t.Fatalf("kind %d: decoded %+v (trace %+v), %v: want the kind and trace context back", e.kind, got, got.trace, err)
		}
	}
}

func TestDecodeEnvelopeRefusesBadInput(t *testing.T) {
	good := (&envelope{kind: kindAsk, id: 7, typ: "t", key: "k", body: []byte("x"), ttl: 5}).encode()
	head := good[:len(good)-2] // before the request id's form and the empty idempotency key
	tracedHead := append([]byte{}, head...)
	tracedHead[1] |= traced
	zeroParent := "00-00000000000000000000000000000000-b7ad6b7169203331-01"
	for name, b := range map[string][]byte{
		"empty":          {},
		"version":        append([]byte{9}, good[1:]...),
		"unknown kind":   {envelopeVersion, 99},
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte{}, good...), 0),
		"huge length":    {envelopeVersion, kindMembers, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"version 2":      append([]byte{2}, good[1:]...),
		"rid form":       append(append([]byte{}, head...), 9, 0),
		"rid made zero":  append(append(append([]byte{}, head...), append([]byte{ridMade}, make([]byte, 16)...)...), 0),
		"rid made short": append(append([]byte{}, head...), ridMade, 0, 0, 1),
		"rid named bad":  append(append([]byte{}, head...), ridNamed, 2, 'a', ' ', 0),
		"rid named long": append(append(append([]byte{}, head...), ridNamed, 65), append(make([]byte, 65), 0)...),
		"rid named none": append(append([]byte{}, head...), ridNamed, 0, 0),
		"idem bad":       append(append([]byte{}, head...), ridNone, 2, 'a', ' '),
		"idem long":      append(append(append([]byte{}, head...), ridNone, 0x80, 0x02), bytes.Repeat([]byte{'x'}, 256)...),
		"idem missing":   append(append([]byte{}, head...), ridNone),
		"trace missing":  append(append([]byte{}, tracedHead...), ridNone, 0),
		"trace bad":      append(append(append([]byte{}, tracedHead...), ridNone, 0, 3), "abc\x00"...),
		"trace zero id": append(append(append([]byte{}, tracedHead...), ridNone, 0, byte(len(zeroParent))),
			append([]byte(zeroParent), 0)...),
		"state alone": append(append([]byte{}, tracedHead...), ridNone, 0, 0, 6, 'r', 'o', 'j', 'o', '=', '1'),
		"state bad": append(append(append([]byte{}, tracedHead...), ridNone, 0, byte(len(testParent))),
			append([]byte(testParent), 4, 'R', 'O', '=', '1')...),
		"traced drain":  {envelopeVersion, kindDrain | traced, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"traced cancel": {envelopeVersion, kindCancel | traced, 1},
		// Placement versions and list digests are short visible ASCII.
		"sync since, no digest":  {envelopeVersion, kindSyncSince, 1},
		"sync since, bad digest": {envelopeVersion, kindSyncSince, 1, 2, 'a', ' '},
		"sync since, long":       append([]byte{envelopeVersion, kindSyncSince, 1, 65}, bytes.Repeat([]byte{'a'}, 65)...),
		"members v, no body":     {envelopeVersion, kindMembersV, 1, 1, 'v'},
		"members v, bad version": {envelopeVersion, kindMembersV, 1, 1, 0x7f, 0},
		"version, no digest":     {envelopeVersion, kindVersion, 0, 1, 'v'},
		"version, bad digest":    {envelopeVersion, kindVersion, 0, 1, 'v', 1, 0xc3},
		"traced version":         {envelopeVersion, kindVersion | traced, 0, 0, 0},
	} {
		if _, err := decodeEnvelope(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add((&envelope{kind: kindAsk, id: 7, typ: "t", key: "k", body: []byte("x"), ttl: 5, chain: []string{"a/b"}}).encode())
	// The request id's forms.
	f.Add((&envelope{kind: kindAsk, id: 7, typ: "t", key: "k", body: []byte("x"), rid: host.MadeRequestID(1<<63, 42)}).encode())
	f.Add((&envelope{kind: kindAsk, id: 7, typ: "t", key: "k", body: []byte("x"), rid: host.NamedRequestID("req-1")}).encode())
	f.Add((&envelope{kind: kindAsk, id: 7, typ: "t", key: "k", body: []byte("x"), idem: "pay-1"}).encode())
	// Trace contexts, on an ask and a tell.
	f.Add((&envelope{kind: kindAsk, id: 7, typ: "t", key: "k", body: []byte("x"), trace: &host.Trace{Parent: testParent, State: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}}).encode())
	f.Add((&envelope{kind: kindTell, typ: "t", key: "k", body: []byte("x"), trace: &host.Trace{Parent: testFutureParent}}).encode())
	f.Add((&envelope{kind: kindReply, id: 7, err: &wireError{code: codeFailed, msg: "m", cause: &wireError{code: codeCycle}}}).encode())
	// The codes whose payload came with declared errors and panics.
	f.Add((&envelope{kind: kindReply, id: 7, err: &wireError{code: codeDeclared, msg: "w: e", name: "pkg.E", body: []byte{0x81, 0xa1, 'N', 0x07}}}).encode())
	f.Add((&envelope{kind: kindReply, id: 7, err: &wireError{code: codeFailed, msg: "panic: torn", actor: "a/1", hint: "m:1", cause: &wireError{code: codePanic, msg: "panic: torn"}}}).encode())
	f.Add((&envelope{kind: kindReply, id: 7, err: &wireError{code: codeFailed, msg: "m", cause: &wireError{code: codeDeclared, name: "e", msg: "e"}}}).encode())
	f.Add((&envelope{kind: kindReply, id: 7, err: &wireError{code: codeTooLarge, msg: "too large"}}).encode())
	// Member lists and versions.
	f.Add((&envelope{kind: kindSyncSince, id: 3, digest: "0123456789abcdef0123456789abcdef"}).encode())
	f.Add((&envelope{kind: kindMembersV, id: 3, version: "0123456789abcdef0123456789abcdef", body: []byte{0x90}}).encode())
	f.Add((&envelope{kind: kindVersion, version: "0123456789abcdef0123456789abcdef", digest: "fedcba9876543210fedcba9876543210"}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEnvelope(b)
		if err != nil {
			return
		}
		if len(e.version) > maxToken || len(e.digest) > maxToken {
			t.Fatalf("decoded a token over %d bytes: version %q, digest %q", maxToken, e.version, e.digest)
		}
		// What decodes encodes back to something that decodes the same.
		again, err := decodeEnvelope(e.encode())
		if err != nil || again.kind != e.kind || again.id != e.id || again.key != e.key || again.rid != e.rid ||
			again.version != e.version || again.digest != e.digest || !bytes.Equal(again.body, e.body) ||
			(again.trace == nil) != (e.trace == nil) || (e.trace != nil && *again.trace != *e.trace) {
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
		{fault.OutcomeUnknown("owner down"), []error{actor.ErrOutcomeUnknown, actor.ErrUnavailable}},
		{context.DeadlineExceeded, []error{context.DeadlineExceeded}},
		{cycle, []error{actor.ErrAskCycle}},
		{&actor.FailedError{Actor: "a/1", Cause: cycle}, []error{actor.ErrActorFailed, actor.ErrAskCycle}},
		{&actor.FailedError{Actor: "a/1", Cause: errors.New("boom")}, []error{actor.ErrActorFailed}},
		{&notOwnerError{hint: "h:1"}, []error{errNotOwner}},
		{fmt.Errorf("%w: 20 MiB", actor.ErrMessageTooLarge), []error{actor.ErrMessageTooLarge}},
		{fmt.Errorf("send: %w", wire.ErrMessageTooLarge), []error{actor.ErrMessageTooLarge}},
		{fmt.Errorf("%w: key k", actor.ErrIdempotencyConflict), []error{actor.ErrIdempotencyConflict}},
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

// Another node's ErrSystemClosed means its actors are unavailable to the
// asker: it arrives as ErrUnavailable, which is temporary, while this
// system's own ErrSystemClosed is not.
func TestAnotherNodesSystemClosedIsTemporary(t *testing.T) {
	e := envelope{kind: kindReply, id: 1, err: toWire(fmt.Errorf("deliver: %w", fault.ErrSystemClosed))}
	got, err := decodeEnvelope(e.encode())
	if err != nil {
		t.Fatal(err)
	}
	back := fromWire(got.err, "node")
	if !errors.Is(back, actor.ErrUnavailable) || errors.Is(back, actor.ErrSystemClosed) || !actor.Temporary(back) {
		t.Errorf("got %v, want ErrUnavailable (not ErrSystemClosed), temporary", back)
	}
	if actor.Temporary(actor.ErrSystemClosed) {
		t.Error("this system's own ErrSystemClosed counts as temporary")
	}
}

func TestFailuresCarryTheirMemberAndWhetherTheHandlerPanicked(t *testing.T) {
	for _, c := range []struct {
		in    *fault.FailedError
		cause string
	}{
		{&fault.FailedError{Member: "m:1", Actor: "a/1", Cause: errors.New("boom")}, "boom"},
		{&fault.FailedError{Member: "m:1", Actor: "a/1", Cause: &fault.PanicError{Value: "torn"}, Panic: true}, "panic: torn"},
		{&fault.FailedError{Actor: "a/1", Cause: errors.New("boom")}, "boom"}, // member: the replier
		{&fault.FailedError{Member: "m:1", Actor: "a/1", Cause: fmt.Errorf("ask b/2: %w", fault.ErrMailboxFull)}, "ask b/2: troupe: mailbox full"},
		// A failure passed on, of an actor that panicked: the passer did not panic.
		{&fault.FailedError{Member: "m:1", Actor: "a/1", Cause: &fault.FailedError{Member: "m:2", Actor: "b/2", Cause: &fault.PanicError{Value: "torn"}, Panic: true}},
			"troupe: actor b/2 failed: panic: torn"},
	} {
		e := envelope{kind: kindReply, id: 1, err: toWire(c.in)}
		got, err := decodeEnvelope(e.encode())
		if err != nil {
			t.Fatal(err)
		}
		var fe *fault.FailedError
		if !errors.As(fromWire(got.err, "node:9#4"), &fe) {
			t.Fatalf("%v: no FailedError came back", c.in)
		}
		member := c.in.Member
		if member == "" {
			member = "node:9"
		}
		_, ownPanic := fe.Cause.(*fault.PanicError)
		if fe.Member != member || fe.Actor != c.in.Actor || fe.Panic != c.in.Panic || fe.Cause.Error() != c.cause || ownPanic != c.in.Panic {
			t.Errorf("%+v came back as %+v", c.in, fe)
		}
	}
}

func TestDeclaredErrorsCrossAsNameBodyAndText(t *testing.T) {
	in := &fault.DeclaredError{Name: "*bank.FundsError", Body: []byte{0x80}, Text: "withdraw: need 7"}
	e := envelope{kind: kindReply, id: 1, err: toWire(fmt.Errorf("relayed: %w", in))}
	b := e.encode()
	got, err := decodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	back := fromWire(got.err, "node")
	clear(b) // the error must not alias the network buffer
	var de *fault.DeclaredError
	if !errors.As(back, &de) || de.Name != in.Name || string(de.Body) != string([]byte{0x80}) || de.Text != in.Text {
		t.Fatalf("got %+v, want %+v", de, in)
	}
}

func TestBatchFramingRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var want [][]byte
		var b []byte
		for _, size := range rapid.SliceOf(rapid.SampledFrom([]int{0, 1, 100, 127, 128, 300, 16383, 16384, 70000})).Draw(t, "sizes") {
			e := &envelope{kind: kindTell, key: "k", body: make([]byte, size)}
			b = e.appendFramed(b, nil)
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
	var prev tellHead
	b := (&envelope{kind: kindAsk, id: 1, typ: "t", key: "k"}).appendFramed(nil, &prev)
	b = (&envelope{kind: kindCancel, id: 1}).appendFramed(b, &prev)
	for _, key := range []string{"k", "k", "j"} {
		b = (&envelope{kind: kindTell, token: 3, typ: "t", key: key, name: "n", body: []byte{1}}).appendFramed(b, &prev)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		var prev tellHead
		_ = splitBatch(b, func(p []byte) {
			total += len(p)
			// The repeat fast path accepts only what decode decodes, and
			// decodes it the same.
			var fast envelope
			was := prev
			repeat := fast.decodeRepeat(p, &prev)
			var e envelope
			err := e.decode(p, &prev) // must not panic
			if repeat && (err != nil || !reflect.DeepEqual(fast, e) || prev != was) {
				t.Fatalf("decodeRepeat gave %+v, decode %+v (%v); head %+v, then %+v", fast, e, err, was, prev)
			}
		})
		if total > len(b) {
			t.Fatalf("split %d bytes out of %d", total, len(b))
		}
	})
}

// A batch's tells after the first travel as kindTellNext, taking what
// they share with the envelope before them; every envelope decodes back
// as it was, in order.
func TestBatchedTellsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		small := func(name string) *rapid.Generator[string] {
			return rapid.SampledFrom([]string{name + "1", name + "2", ""})
		}
		var want []envelope
		var b []byte
		var prev tellHead
		for i := range rapid.IntRange(0, 40).Draw(t, "n") {
			e := envelope{kind: rapid.SampledFrom([]uint8{kindTell, kindTell, kindTell, kindAsk, kindCancel, kindReply}).Draw(t, "kind")}
			switch e.kind {
			case kindTell, kindAsk:
				e.typ, e.key, e.name = small("t").Draw(t, "typ"), small("k").Draw(t, "key"), small("m").Draw(t, "name")
				e.token = uint64(len(e.key)) // the same for the same key, as a real token
				if rapid.Bool().Draw(t, "other token") {
					e.token += 100
				}
				e.body = rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "body")
				e.hops = rapid.Uint8Range(0, 1).Draw(t, "hops")
				if e.kind == kindAsk {
					e.id, e.ttl = uint64(i+1), 5
				}
				if rapid.IntRange(0, 3).Draw(t, "traced") == 0 {
					// A traced tell is never continued, and the tell after
					// it may be, without its trace context.
					e.trace = &host.Trace{Parent: testParent}
				}
			case kindCancel, kindReply:
				e.id = uint64(i + 1)
			}
			want = append(want, e)
			if e.kind == kindTell && rapid.Bool().Draw(t, "encoded into the batch") {
				lazy := e
				lazy.body = nil
				b = lazy.appendFramedBody(b, &prev, bytesAppender{}, e.body)
			} else {
				b = e.appendFramed(b, &prev)
			}
		}
		var got []envelope
		var dprev tellHead
		if err := splitBatch(b, func(p []byte) {
			var e envelope
			if err := e.decode(p, &dprev); err != nil {
				t.Fatalf("envelope %d: %v", len(got), err)
			}
			got = append(got, e)
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d envelopes, want %d", len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if len(g.body) == 0 && len(w.body) == 0 {
				g.body, w.body = nil, nil
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("envelope %d: got %+v, want %+v", i, g, w)
			}
		}
	})
}

func TestContinuedTellNeedsATellBefore(t *testing.T) {
	var prev tellHead
	tell := &envelope{kind: kindTell, token: 1, typ: "t", key: "k", body: []byte{1}}
	first := tell.appendNextBody(nil, &prev, nil, nil)
	next := tell.appendNextBody(nil, &prev, nil, nil)
	if next[1] != kindTellNext || len(next) >= len(first) {
		t.Fatalf("the second tell encodes as kind %d in %d bytes (the first in %d), want a shorter kindTellNext", next[1], len(next), len(first))
	}
	if _, err := decodeEnvelope(next); !errors.Is(err, ErrMalformed) {
		t.Errorf("alone: err = %v, want ErrMalformed", err)
	}
	after := tellHead{}
	after.set(&envelope{kind: kindCancel, id: 1})
	var e envelope
	if err := e.decode(next, &after); !errors.Is(err, ErrMalformed) {
		t.Errorf("after a cancel: err = %v, want ErrMalformed", err)
	}
	bad := append([]byte{}, next...)
	bad[2] = 0x80 // unknown flag
	ok := tellHead{}
	ok.set(tell)
	if err := e.decode(bad, &ok); !errors.Is(err, ErrMalformed) {
		t.Errorf("unknown flag: err = %v, want ErrMalformed", err)
	}
}

// bytesAppender is a host.MessageAppender whose messages are their
// encoding.
type bytesAppender struct{}

func (bytesAppender) AppendMessage(dst []byte, m any) []byte { return append(dst, m.([]byte)...) }

// Only a batch of replies is quick (wire delivers it without its relief
// watch): anything else may run a handler or wait for mailbox room.
func TestOnlyABatchOfRepliesIsQuick(t *testing.T) {
	var prev tellHead
	reply := func(b []byte, id uint64) []byte {
		return (&envelope{kind: kindReply, id: id, body: []byte{1, 2}}).appendFramed(b, &prev)
	}
	replies := reply(reply(nil, 1), 2)
	cases := []struct {
		name  string
		batch []byte
		quick bool
	}{
		{"one reply", reply(nil, 7), true},
		{"replies", replies, true},
		{"empty", nil, false},
		{"a reply then an ask", (&envelope{kind: kindAsk, id: 3, typ: "t", key: "k"}).appendFramed(replies, &prev), false},
		{"a tell then a reply", reply((&envelope{kind: kindTell, typ: "t", key: "k"}).appendFramed(nil, &prev), 4), false},
		{"a cancel", (&envelope{kind: kindCancel, id: 1}).appendFramed(nil, &prev), false},
		{"cut short", replies[:len(replies)-1], false},
		{"garbage", []byte{0x05, 0x01}, false},
	}
	for _, c := range cases {
		if got := (receiver{}).Quick(c.batch); got != c.quick {
			t.Errorf("%s: Quick = %v, want %v", c.name, got, c.quick)
		}
	}
}

// Decoded strings are copies: overwriting the batch afterwards (a
// transport reusing its buffer) leaves them as they were, whether they
// were copied out of it or reused from the envelope before.
func TestDecodedEnvelopeStringsOutliveTheBuffer(t *testing.T) {
	first := envelope{kind: kindTell, token: 1, typ: "counter", key: "k1", name: "main.add", body: []byte{0x80}}
	second := envelope{kind: kindTell, token: 2, typ: "counter", key: "k2", name: "main.add", body: []byte{0x81}}
	third := envelope{kind: kindAsk, id: 3, token: 2, typ: "counter", key: "k2", name: "main.get", body: []byte{0x82}}
	var enc tellHead
	var batch [][]byte
	for _, e := range []*envelope{&first, &second, &third} {
		batch = append(batch, e.appendNextBody(nil, &enc, nil, nil))
	}
	var prev tellHead
	var got []envelope
	for _, b := range batch {
		var e envelope
		if err := e.decode(b, &prev); err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	for _, b := range batch {
		for i := range b {
			b[i] = 'X'
		}
	}
	for i, want := range []envelope{first, second, third} {
		g := got[i]
		if g.typ != want.typ || g.key != want.key || g.name != want.name {
			t.Errorf("envelope %d after the buffer was overwritten: %q %q %q, want %q %q %q", i, g.typ, g.key, g.name, want.typ, want.key, want.name)
		}
	}
}

// Stage one decodes an ask with the strings of the ask before from the
// same peer: an asker mostly repeats its type, key and request name, and
// a repeated one costs no copy.
func TestStageOneReusesTheLastAsksStrings(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.setView(a)
	in := a.r.inboxFor(b.id)
	ask := func(key string) []byte {
		e := envelope{kind: kindAsk, id: a.r.nextID.Add(1), token: a.r.Token("counter", key), typ: "counter", key: key, name: "none", body: []byte{0x80}}
		return e.appendTo(nil)
	}
	a.r.sort(in, ask("k1"), false, nil)
	first := in.asked.Load()
	if first == nil || first.typ != "counter" || first.key != "k1" || first.name != "none" {
		t.Fatalf("expected stage one to keep the ask's strings, got %+v", first)
	}
	a.r.sort(in, ask("k1"), false, nil)
	if in.asked.Load() != first {
		t.Fatal("expected the same strings kept for a repeated ask")
	}
	var e envelope
	if err := e.decodeAfter(ask("k1"), first); err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(e.typ) != unsafe.StringData(first.typ) || unsafe.StringData(e.key) != unsafe.StringData(first.key) || unsafe.StringData(e.name) != unsafe.StringData(first.name) {
		t.Error("expected a repeated ask's strings to be the ones kept, not copies")
	}
	a.r.sort(in, ask("k2"), false, nil)
	if got := in.asked.Load(); got.key != "k2" || got.ok {
		t.Fatalf("expected the next key's strings kept, never as a tell to continue, got %+v", got)
	}
}

// A peer's worker reuses the strings of the segment before, but a
// segment starts afresh: a continued tell cannot open it.
func TestContinuedTellCannotOpenASegment(t *testing.T) {
	ns := newTestNodes(t, "a:1", "b:1")
	a, b := ns[0], ns[1]
	a.setView(a)
	in := a.r.inboxFor(b.id)
	e := envelope{kind: kindTell, token: a.r.Token("counter", "k"), typ: "counter", key: "k", name: "none", body: []byte{0x80}}
	var enc tellHead
	first := e.appendFramed(nil, &enc)
	next := e.appendFramed(nil, &enc) // continues first
	if len(next) >= len(first) {
		t.Fatalf("expected the second tell continued, shorter: %x after %x", next, first)
	}
	in.handle(first)
	if len(in.items) != 1 {
		t.Fatalf("expected the first segment's tell decoded, got %d items", len(in.items))
	}
	in.handle(next)
	if len(in.items) != 0 {
		t.Fatalf("expected a continued tell opening a segment dropped, got %d items", len(in.items))
	}
}
