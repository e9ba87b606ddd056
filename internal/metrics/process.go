package metrics

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	// BuildInfo is troupe_build_info.
	BuildInfo = prometheus.NewDesc("troupe_build_info",
		"Always 1; the labels name the Troupe module's version and the Go version it was built with.",
		[]string{"version", "goversion"}, nil)
	// Uptime is troupe_uptime_seconds.
	Uptime = prometheus.NewDesc("troupe_uptime_seconds",
		"Seconds since the system or client started.", nil, nil)
	// Ready is troupe_ready.
	Ready = prometheus.NewDesc("troupe_ready",
		"1 when the process is ready: every readiness check of a member passes (see /readyz); a client knows an alive member and is not closed. 0 otherwise.", nil, nil)
	// AsksInFlight is troupe_asks_in_flight.
	AsksInFlight = prometheus.NewDesc("troupe_asks_in_flight",
		"Asks waiting for a reply.", nil, nil)
)

// Process reports what every Troupe process has: its build and uptime.
type Process struct {
	started time.Time
	version string
}

// NewProcess returns the Process of a system or client that started at
// started.
func NewProcess(started time.Time) Process {
	return Process{started: started, version: ModuleVersion()}
}

// Describe sends the descriptors of Collect.
func (p Process) Describe(ch chan<- *prometheus.Desc) {
	ch <- BuildInfo
	ch <- Uptime
}

// Collect reports the build and the uptime.
func (p Process) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(BuildInfo, prometheus.GaugeValue, 1, p.version, runtime.Version())
	ch <- prometheus.MustNewConstMetric(Uptime, prometheus.GaugeValue, time.Since(p.started).Seconds())
}

// Gauge reports the gauge d at v.
func Gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// Counter reports the counter d at v.
func Counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// Bool is 1 for true, 0 for false: a gauge's value.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ModuleVersion returns the version of the Troupe module this program was
// built with, "(devel)" when it is the main module or unknown.
func ModuleVersion() string {
	const path = "github.com/troupe-go/troupe"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Path == path && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			if d.Version != "" {
				return d.Version
			}
		}
	}
	return "(devel)"
}
