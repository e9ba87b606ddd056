//go:build !linux

package wire

import "syscall"

func rawRead(fd int, p []byte) (int, error)  { return syscall.Read(fd, p) }
func rawWrite(fd int, b []byte) (int, error) { return syscall.Write(fd, b) }
