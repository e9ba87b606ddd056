//go:build !linux

package runtime

import (
	"context"
	"time"
)

// Elsewhere the asker waits on its channel (see waker_linux.go).
type waker struct{}

func getWaker() *waker                                   { return nil }
func putWaker(*waker)                                    {}
func (*waker) wake()                                     {}
func (*waker) arm(context.Context, time.Time)            {}
func (*waker) disarm()                                   {}
func (*waker) waitArmed(context.Context, outcomer) error { return nil }
