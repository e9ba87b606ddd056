package delayproxy

import "errors"

// ErrConfig is returned for a Config that Validate rejects; the message
// names the field.
var ErrConfig = errors.New("troupe: delayproxy: invalid config")
