package cluster

import (
	"crypto/x509"
	"testing"

	"github.com/troupe-go/troupe/wire"
)

// The transport a member runs on takes its cluster name, identity, TLS and
// address map from the membership config, so the two cannot disagree.
func TestWireConfigCarriesTheClusterSettings(t *testing.T) {
	cfg := FastConfig("10.1.2.3:7400")
	cfg.ClusterName = "blue"
	cfg.AddressMap = map[string]string{"10.1.2.4:7400": "127.0.0.1:17400"}
	cfg.TLS = &wireTLSForTest
	w := cfg.WireConfig(42)
	if w.ClusterName != "blue" || w.Advertise != "10.1.2.3:7400" || w.Incarnation != 42 {
		t.Errorf("WireConfig = name %q, advertise %q, incarnation %d; want blue, 10.1.2.3:7400, 42",
			w.ClusterName, w.Advertise, w.Incarnation)
	}
	if w.TLS != cfg.TLS {
		t.Error("WireConfig dropped the TLS settings")
	}
	if w.AddressMap["10.1.2.4:7400"] != "127.0.0.1:17400" {
		t.Errorf("WireConfig address map = %v, want the cluster's", w.AddressMap)
	}
	if w.Logger == nil {
		t.Error("WireConfig gave the transport no logger")
	}
}

// A zero ClusterName means the default on both sides.
func TestWireConfigAppliesTheDefaults(t *testing.T) {
	w := FastConfig("127.0.0.1:7400").WireConfig(1)
	if w.ClusterName != "troupe" {
		t.Errorf("default cluster name on the transport = %q, want troupe", w.ClusterName)
	}
	w.TLS = nil
	if err := w.Validate(); err != nil {
		t.Errorf("transport config from a valid cluster config does not validate: %v", err)
	}
}

var wireTLSForTest = wire.TLS{CA: x509.NewCertPool()}
