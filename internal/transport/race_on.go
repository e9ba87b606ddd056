//go:build race && linux

package transport

import (
	"runtime"
	"unsafe"
)

const raceEnabled = true

// ioSync stands for the socket as syscall's own ioSync does: a write
// releases on it and a read acquires it, so the race detector sees a
// write ordered before the read of its bytes, as it does for
// syscall.Read and Write. Only its address is used.
var ioSync int64

// raceRead reports the bytes a read filled, and orders the read after
// the writes before it.
func raceRead(p []byte) {
	if len(p) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&p[0]), len(p))
	}
	runtime.RaceAcquire(unsafe.Pointer(&ioSync))
}

// raceBeforeWrite orders what the writer did before a write before the
// reads that see its bytes.
func raceBeforeWrite() { runtime.RaceReleaseMerge(unsafe.Pointer(&ioSync)) }

// raceWritten reports the bytes a write read from memory.
func raceWritten(b []byte) {
	if len(b) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&b[0]), len(b))
	}
}
