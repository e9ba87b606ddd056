// Package codec encodes the messages and replies that cross nodes, as
// msgpack/v5 writes them: per-type plans where a type allows one (plan.go),
// msgpack's own path otherwise. Package runtime uses it; decoders bound
// to a host let refs inside messages bind to the receiving system.
package codec
