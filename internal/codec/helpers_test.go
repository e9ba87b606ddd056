package codec

import (
	"fmt"

	"github.com/troupe-go/troupe/internal/host"
	"github.com/vmihailenco/msgpack/v5"
)

// Reply stands in, for these tests, for actor.Reply: request types embed
// it.
type Reply[M, R any] struct{}

// Ref stands in for actor.Ref: a type with its own msgpack encoding, [type,
// key], bound on decoding to the host of the decoder's source when that
// host hosts the type (here: the type "inline"), as the runtime's refs are.
type Ref[M any] struct {
	to       *host.Host
	typ, key string
}

func (r Ref[M]) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := enc.EncodeString(r.typ); err != nil {
		return err
	}
	return enc.EncodeString(r.key)
}

func (r *Ref[M]) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n == -1 {
		*r = Ref[M]{}
		return nil
	}
	if n != 2 {
		return fmt.Errorf("decode ref: want 2 fields, got %d", n)
	}
	if r.typ, err = dec.DecodeString(); err != nil {
		return err
	}
	if r.key, err = dec.DecodeString(); err != nil {
		return err
	}
	r.to = nil
	if b, ok := dec.Buffered().(interface{ Host() *host.Host }); ok && r.typ == "inline" {
		r.to = b.Host()
	}
	return nil
}
