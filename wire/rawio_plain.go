//go:build !linux || race

package wire

import "syscall"

// Elsewhere, and under the race detector, rawRead and rawWrite are the
// plain system calls (see rawio_linux.go).
func rawRead(fd int, p []byte) (int, error)  { return syscall.Read(fd, p) }
func rawWrite(fd int, b []byte) (int, error) { return syscall.Write(fd, b) }
