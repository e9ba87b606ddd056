package membership

import (
	"errors"

	"github.com/vmihailenco/msgpack/v5"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// encodeRaw encodes m without stamping the current version.
func encodeRaw(m Message) ([]byte, error) { return msgpack.Marshal(&m) }
