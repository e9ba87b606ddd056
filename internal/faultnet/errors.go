package faultnet

import "errors"

// ErrCut is the cause of every error returned by a connection after a
// scheduled or manual cut. Callers match it with errors.Is; the error itself
// is a *net.OpError, so code that only looks at net errors sees a broken
// connection.
var ErrCut = errors.New("troupe: faultnet: connection cut")

// ErrReset is the cause of every error returned by a connection after a
// scheduled or manual reset (TCP RST instead of FIN).
var ErrReset = errors.New("troupe: faultnet: connection reset")

// ErrPartitioned is returned by a dial between two endpoints that a
// Network has partitioned.
var ErrPartitioned = errors.New("troupe: faultnet: endpoints partitioned")

// ErrInvalidRange is returned by Between when the range is empty or negative.
var ErrInvalidRange = errors.New("troupe: faultnet: invalid offset range")

// ErrAddrInUse is returned by ListenPipe for a name already listening.
var ErrAddrInUse = errors.New("troupe: faultnet: address in use")

// ErrRefused is returned by a dial to a pipe listener that closed.
var ErrRefused = errors.New("troupe: faultnet: connection refused")
