package system

import "errors"

// ErrDuplicateActor reports two definitions registered under one name.
var ErrDuplicateActor = errors.New("troupe: duplicate actor type name")

// ErrInvalidConfig reports a Config that Validate rejects.
var ErrInvalidConfig = errors.New("troupe: invalid system config")
