package transport

import "github.com/troupe-go/troupe/wire"

// newTuned is New with the engine's tuning changed before the transport
// serves or dials, so every connection it makes sees the change.
func newTuned(cfg wire.Config, tune func(*tuning)) (*Transport, error) {
	t, err := New(cfg)
	if err == nil && tune != nil {
		tune(&t.tune)
	}
	return t, err
}
