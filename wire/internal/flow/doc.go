// Package flow is the deterministic core of the transport's flow control,
// pacing and frame scheduling. It has no goroutines, reads no clock and
// touches no socket: the session passes the time in and does what the
// results say.
package flow
