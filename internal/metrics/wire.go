package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/troupe-go/troupe/internal/transport"
)

// The transport's metrics.
var (
	SentFrames = prometheus.NewDesc("troupe_wire_sent_frames_total",
		"Frames written to other members and clients after the handshake, by stream (connection frames count on control).",
		[]string{"stream"}, nil)
	SentBytes = prometheus.NewDesc("troupe_wire_sent_bytes_total",
		"Bytes of the frames written, headers included, after compression, by stream.",
		[]string{"stream"}, nil)
	ReceivedFrames = prometheus.NewDesc("troupe_wire_received_frames_total",
		"Frames read from other members and clients after the handshake, by stream.",
		[]string{"stream"}, nil)
	ReceivedBytes = prometheus.NewDesc("troupe_wire_received_bytes_total",
		"Bytes of the frames read, headers included, as they came (compressed), by stream.",
		[]string{"stream"}, nil)
	Resumes = prometheus.NewDesc("troupe_wire_resumes_total",
		"Sessions with a peer that continued on a new connection after one broke, resending what the peer had not received.", nil, nil)
	Connected = prometheus.NewDesc("troupe_wire_connected_peers",
		"Peers (members and clients) with a connection now.", nil, nil)
	RTT = prometheus.NewDesc("troupe_wire_rtt_max_seconds",
		"The largest round-trip time over the connected peers: the pacing estimator's minimum round trip to each, measured from credits and pings; 0 before any.", nil, nil)
	Pacing = prometheus.NewDesc("troupe_wire_pacing_rate_bytes_per_second",
		"The sum over connected peers of the rate data is paced at: what the transport would send at most, not what it sends.", nil, nil)
)

// WireDescs are the descriptors of CollectWire.
var WireDescs = []*prometheus.Desc{SentFrames, SentBytes, ReceivedFrames, ReceivedBytes, Resumes, Connected, RTT, Pacing}

// streams are the values of the troupe_wire_* metrics' stream label,
// indexed by transport.StreamID.
var streams = func() (names [transport.NumStreams]string) {
	for i := range names {
		names[i] = transport.StreamID(i).String()
	}
	return names
}()

// CollectWire reports the transport's counters from total (what every
// transport of the process counted so far) and its gauges from now (the
// current transport's snapshot).
func CollectWire(ch chan<- prometheus.Metric, total, now transport.Stats) {
	for i, stream := range streams {
		Counter(ch, SentFrames, float64(total.Sent[i].Frames), stream)
		Counter(ch, SentBytes, float64(total.Sent[i].Bytes), stream)
		Counter(ch, ReceivedFrames, float64(total.Received[i].Frames), stream)
		Counter(ch, ReceivedBytes, float64(total.Received[i].Bytes), stream)
	}
	Counter(ch, Resumes, float64(total.Resumes))
	Gauge(ch, Connected, float64(now.Connected))
	Gauge(ch, RTT, now.MaxRTT.Seconds())
	Gauge(ch, Pacing, now.PacingRate)
}
