package delayproxy

import "errors"

// ErrConfig is returned for a Config that Validate rejects; the message
// names the field.
var ErrConfig = errors.New("troupe: delayproxy: invalid config")

// ErrClosed is returned by operations on a proxy that has shut down.
var ErrClosed = errors.New("troupe: delayproxy: proxy closed")
