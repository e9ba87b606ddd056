package idempotency

import "errors"

// ErrKeyInvalid reports an Idempotency-Key that is empty, longer than
// MaxKeyLen or holds other than visible ASCII characters.
var ErrKeyInvalid = errors.New("troupe: idempotency key invalid")

// ErrStaleAttempt reports a Complete for an attempt that is not the one
// the store started for its key (or the key expired meanwhile): an older
// attempt never completes a record.
var ErrStaleAttempt = errors.New("troupe: idempotency attempt is not the current one")

// ErrInvalidConfig reports a Config that New refuses.
var ErrInvalidConfig = errors.New("troupe: invalid idempotency config")
