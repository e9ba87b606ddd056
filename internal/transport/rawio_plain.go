//go:build !linux

package transport

import "syscall"

// Elsewhere than Linux, rawRead and rawWrite are the plain system calls
// (see rawio_linux.go).
func rawRead(fd int, p []byte) (int, error)  { return syscall.Read(fd, p) }
func rawWrite(fd int, b []byte) (int, error) { return syscall.Write(fd, b) }

// rawWritev writes the first non-empty piece of vec: the caller loops.
func rawWritev(fd int, vec [][]byte, iov []syscall.Iovec) (int, []syscall.Iovec, error) {
	for _, b := range vec {
		if len(b) > 0 {
			n, err := syscall.Write(fd, b)
			return max(n, 0), iov, err
		}
	}
	return 0, iov, nil
}
