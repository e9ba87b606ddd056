package flow_test

import (
	"fmt"
	"time"

	"github.com/troupe-go/troupe/internal/transport/flow"
)

// A writer loop: a large envelope is queued first, a small one on another
// key after it; the small one is written first, and the large one in
// frames. Pacing waits are slept in virtual time.
func ExampleScheduler() {
	const app flow.StreamID = 2
	s, err := flow.NewScheduler(flow.Config{
		MaxFrame: 16 << 10,
		Streams:  []flow.StreamConfig{{ID: app, Class: flow.ClassData}},
	})
	if err != nil {
		panic(err)
	}
	now := time.Unix(0, 0)
	_, _ = s.Enqueue(app, 1, make([]byte, 40<<10)) // 40 KiB to key 1
	_, _ = s.Enqueue(app, 2, []byte("hello"))      // 5 bytes to key 2
	for s.Pending() > 0 {
		f, wait, ok := s.Next(now)
		if !ok {
			now = now.Add(wait) // a real session arms a timer
			continue
		}
		fmt.Printf("stream %d envelope %d bytes [%d,%d) first=%v last=%v\n",
			f.Stream, f.Envelope, f.Offset, f.Offset+f.Len, f.First, f.Last)
	}
	// Output:
	// stream 2 envelope 0 bytes [0,5) first=true last=true
	// stream 2 envelope 1 bytes [0,16384) first=true last=false
	// stream 2 envelope 1 bytes [16384,32768) first=false last=false
	// stream 2 envelope 1 bytes [32768,40960) first=false last=true
}

// The receiving side of a stream: bytes of an incomplete envelope are
// credited on arrival (unless complete envelopes of a window or more wait
// unread), the last frame's bytes when the application has the envelope;
// grants carry cumulative counts.
func ExampleRecvCredit() {
	r, err := flow.NewRecvCredit(flow.RecvConfig{Window: 64 << 10})
	if err != nil {
		panic(err)
	}
	now := time.Unix(0, 0)
	_, _ = r.Arrive(16<<10, false, 0, now)        // first frame of a 20 KiB envelope
	held, _ := r.Arrive(4<<10, true, 20<<10, now) // its last frame
	if g, ok := r.Grant(now, 0); ok {             // not yet: below the threshold
		fmt.Println("unexpected grant", g)
	}
	_ = r.Consume(held, now)                         // the application took it
	g, ok := r.Grant(now.Add(2*time.Millisecond), 0) // due after GrantDelay
	fmt.Printf("%v consumed=%d received=%d window=%d\n", ok, g.Consumed, g.Received, g.Window)
	// Output:
	// true consumed=20480 received=20480 window=65536
}
