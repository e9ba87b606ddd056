package transport

import (
	"syscall"
	"unsafe"
)

// rawRead and rawWrite are read and write on a non-blocking socket
// without the scheduler's system call bookkeeping (entersyscall): the
// call never blocks and takes microseconds, and that bookkeeping wakes
// the runtime's sysmon thread whenever it sleeps, which it does as soon
// as every P idles, so between any two requests of a request-reply
// exchange. On this project's VMs that wake-up (a futex call, a thread
// switched in on the other vCPU, its sleeps) cost more than the read.
// Every build takes this path: race-detector builds add what
// syscall.Read and Write tell the detector (race_on.go), so the race
// tests run the code that ships.
func rawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	raceRead(p[:n])
	return int(n), nil
}

func rawWrite(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	raceBeforeWrite()
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	raceWritten(b[:n])
	return int(n), nil
}

// rawWritev is writev on a non-blocking socket, as rawWrite; iov is
// scratch space for the vector, returned for reuse.
func rawWritev(fd int, vec [][]byte, iov []syscall.Iovec) (int, []syscall.Iovec, error) {
	for _, b := range vec {
		if len(iov) == maxIovecs {
			break
		}
		if len(b) > 0 {
			v := syscall.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
	}
	if len(iov) == 0 {
		return 0, iov, nil
	}
	raceBeforeWrite()
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	clear(iov) // the vector points into the senders' payloads
	if e != 0 {
		return 0, iov, e
	}
	if raceEnabled {
		left := int(n)
		for _, b := range vec {
			if left == 0 {
				break
			}
			m := min(left, len(b))
			raceWritten(b[:m])
			left -= m
		}
	}
	return int(n), iov, nil
}

// maxIovecs is Linux's IOV_MAX.
const maxIovecs = 1024
