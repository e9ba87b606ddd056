package idempotency

// RecordKey is the key of the Records actor that holds key in s.
var RecordKey = recordKey
