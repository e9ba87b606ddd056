package systemtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// Helpers for the tests of the metrics that systems and clients register
// on a prometheus.Gatherer (a *prometheus.Registry).

// Family returns the metric family name in g, failing the test if it
// has none.
func Family(t testing.TB, g prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no %s on the registry", name)
	return nil
}

// Sample returns the series of family name whose labels are the pairs
// given (name, value, name, value...), failing the test if none is.
func Sample(t testing.TB, g prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	for _, m := range Family(t, g, name).GetMetric() {
		if HasLabels(m, labels) {
			return m
		}
	}
	t.Fatalf("no %s%v on the registry", name, labels)
	return nil
}

// HasLabels reports whether m's labels are exactly the pairs given
// (name, value, name, value...).
func HasLabels(m *dto.Metric, pairs []string) bool {
	if len(m.GetLabel()) != len(pairs)/2 {
		return false
	}
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// CounterValue is the value of a counter series (see Sample).
func CounterValue(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	return Sample(t, g, name, labels...).GetCounter().GetValue()
}

// GaugeValue is the value of a gauge series (see Sample).
func GaugeValue(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	return Sample(t, g, name, labels...).GetGauge().GetValue()
}

// Series counts the series g gathers.
func Series(t testing.TB, g prometheus.Gatherer) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	return n
}

// Lint fails the test with each problem promlint finds in what g
// gathers.
func Lint(t testing.TB, g prometheus.Gatherer) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
