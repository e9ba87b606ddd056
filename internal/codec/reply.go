package codec

import (
	"reflect"
	"sync"

	"github.com/troupe-go/troupe/internal/host"
)

// Replies to asks from other nodes are encoded and decoded with the
// message codec's plans (plan.go) when the reply type is a plain struct:
// the bytes are msgpack's, so either side may take either path, and a
// reply then costs no allocation of its own. Other reply types keep
// msgpack's path.

// replyPlans caches each reply type's plan (nil: msgpack's path).
var replyPlans sync.Map // reflect.Type -> *plan

// replyPlan returns t's plan for replies, or nil: struct types only.
func replyPlan(t reflect.Type) *plan {
	if pl, ok := replyPlans.Load(t); ok {
		return pl.(*plan)
	}
	var pl *plan
	if t.Kind() == reflect.Struct {
		pl = newPlan(t)
	}
	replyPlans.Store(t, pl)
	return pl
}

// replyBounds caches each reply type's bound (see maxEncoded).
var replyBounds sync.Map // reflect.Type -> int

// replyWithin reports whether every reply of type R encodes within limit
// bytes, known from the type alone; false when it must be encoded to tell.
func replyWithin[R any](limit int) bool {
	t := reflect.TypeFor[R]()
	b, ok := replyBounds.Load(t)
	if !ok {
		b, _ = replyBounds.LoadOrStore(t, maxEncoded(t, map[reflect.Type]bool{}))
	}
	n := b.(int)
	return n != unbounded && n <= limit
}

// appendReply appends v's encoding, as msgpack.Marshal writes it, to
// b's buffer.
func appendReply(b *encodeBuffer, v any) ([]byte, error) {
	if v != nil {
		t := reflect.TypeOf(v)
		if pl := replyPlan(t); pl != nil && pl.pure {
			return pl.appendValue(b.w.b, reflect.ValueOf(v)), nil
		} else if pl != nil {
			// Copied into an addressable value for the plan to read.
			s, p := b.scratch.of(t)
			s.Set(reflect.ValueOf(v))
			return pl.appendMessage(b.w.b, p, b)
		}
	}
	err := b.enc.Encode(v)
	return b.w.b, err
}

// decodeReply decodes body into v, of the asker's reply type.
func decodeReply[R any](h *host.Host, body []byte, v *R) error {
	pl := replyPlan(reflect.TypeFor[R]())
	if pl == nil {
		return decodeBound(h, body, v)
	}
	d := getBoundDecoder(h)
	err := d.decodePlan(pl, body, reflect.ValueOf(v).UnsafePointer())
	putBoundDecoder(d)
	return err
}
