package transport

// fifo is a queue kept in one slice that is appended at the back and
// dropped from the front. Re-slicing from the front, as a plain slice
// does, moves the free room ever further from the start, so a queue of
// steady length reallocated and copied itself every few hundred pushes:
// for small envelopes, the resend and await queues alone were 160 bytes
// of garbage per envelope. fifo instead moves what it holds back to the
// start of the slice when it runs out of room and at least half of the
// slice is dropped entries.
type fifo[T any] struct {
	buf  []T
	head int // buf[head:] is the queue
}

// items returns the queue, oldest first; valid until the next push.
func (q *fifo[T]) items() []T { return q.buf[q.head:] }

func (q *fifo[T]) len() int { return len(q.buf) - q.head }

func (q *fifo[T]) push(v T) {
	if len(q.buf) == cap(q.buf) && q.head > 0 && 2*q.head >= len(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, v)
}

// drop removes the n oldest entries.
func (q *fifo[T]) drop(n int) {
	clear(q.buf[q.head : q.head+n]) // they may hold payloads and receipts
	q.head += n
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// reset empties the queue and lets go of its slice.
func (q *fifo[T]) reset() { q.buf, q.head = nil, 0 }
