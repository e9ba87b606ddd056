package netns

import "errors"

// ErrConfig is returned for a Config that Validate rejects; the message
// names the field.
var ErrConfig = errors.New("troupe: netns: invalid config")

// ErrForeignHost is returned when a Host of another Lab is passed to a Lab.
var ErrForeignHost = errors.New("troupe: netns: host belongs to another lab")

// ErrCommand is the cause of every failed ip, tc or nft invocation; the
// wrapping error carries the command line and its output.
var ErrCommand = errors.New("troupe: netns: command failed")

// ErrBadRate is returned for a non-positive bandwidth cap or a loss
// percentage outside 1..100.
var ErrBadRate = errors.New("troupe: netns: invalid rate")
