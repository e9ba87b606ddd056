package remote

import "github.com/troupe-go/troupe/wire"

// envelopeSlack is what the transport's message limit adds to the
// message limit of actor messages: an envelope carries a message with its
// type, key, message name and ask chain, and a batch may hold envelopes
// of up to batchMax bytes before a large one joins it.
const envelopeSlack = 1 << 20

// WireLimits returns the transport limits that carry actor messages of up
// to maxMessage encoded bytes (host.Settings.MaxMessage); the transport's
// other limits keep their defaults. Every node of a cluster derives them
// from the same message limit, as the handshake requires.
func WireLimits(maxMessage int) wire.Limits {
	return wire.Limits{MaxMessage: maxMessage + envelopeSlack}
}
