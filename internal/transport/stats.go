package transport

import "time"

// StreamTraffic counts the frames of one stream in one direction and
// their bytes on the wire, headers included.
type StreamTraffic struct {
	Frames, Bytes uint64
}

func (c *StreamTraffic) count(n int) {
	c.Frames++
	c.Bytes += uint64(n)
}

// traffic is what a session's connections wrote and read, per stream.
// Connection frames (ping, pong, goodbye) count on StreamControl; credit
// and abort frames on the stream they concern.
type traffic struct {
	sent, received [NumStreams]StreamTraffic
}

// add adds o's counts to t.
func (t *traffic) add(o *traffic) {
	for i := range NumStreams {
		t.sent[i].Frames += o.sent[i].Frames
		t.sent[i].Bytes += o.sent[i].Bytes
		t.received[i].Frames += o.received[i].Frames
		t.received[i].Bytes += o.received[i].Bytes
	}
}

// Stats is a snapshot of a transport's traffic and of its paths to the
// peers it is connected to, for metrics. Counts only grow over the
// transport's life; they cover the frames after each connection's
// handshake.
type Stats struct {
	// Sent and Received count frames and bytes by stream (StreamID).
	Sent, Received [NumStreams]StreamTraffic
	// Resumes counts the sessions that continued on a new connection,
	// resending what the peer had not received.
	Resumes uint64
	// Connected is the number of peers with a connection now.
	Connected int
	// MaxRTT is the largest path delay (the pacing estimator's minimum
	// round trip) over the connected peers measured so far; 0 if none.
	MaxRTT time.Duration
	// PacingRate is the sum over connected peers of the rate data is
	// paced at, in bytes per second: what the transport would send at
	// most, not what it sends.
	PacingRate float64
}

// Stats returns a snapshot of the transport's traffic and paths. It
// takes each session's lock in turn: meant for a scrape, not a hot path.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	sum, seen := t.departed, t.removals
	sessions := make([]*session, 0, len(t.sessions))
	for _, s := range t.sessions {
		sessions = append(sessions, s)
	}
	t.mu.Unlock()
	st := Stats{Resumes: t.resumes.Load()}
	for _, s := range sessions {
		s.mu.Lock()
		switch {
		case s.foldSeq == 0:
			sum.add(&s.traffic)
		case s.foldSeq > seen:
			// Removed since departed was read: what it folded in, so
			// that the counts never go back.
			sum.add(&s.folded)
		}
		if s.conn != nil && s.foldSeq == 0 {
			st.Connected++
			est := s.sched.Estimator()
			if est.RTTSampled() {
				st.MaxRTT = max(st.MaxRTT, est.MinRTT())
			}
			st.PacingRate += est.PacingRate()
		}
		s.mu.Unlock()
	}
	st.Sent, st.Received = sum.sent, sum.received
	return st
}
