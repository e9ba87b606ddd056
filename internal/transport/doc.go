// Package transport is the engine behind package wire: one connection per
// pair of nodes, carrying four streams with byte credit, paced at the rate
// the path delivers, and surviving broken connections without losing or
// duplicating an envelope. Package wire holds its configuration and the
// errors a user sees, package ring the node identity (ring.NodeID); the
// byte format is docs/wire.md.
//
// # Layers
//
// The flow package is the deterministic core: credit, pacing and frame
// scheduling, driven with times and events and never touching a socket or
// a clock. This package drives it: a session per peer owns the scheduler
// and the resend buffers and outlives its connections; a liveConn is one
// TCP (or TLS) connection of a session, with a reader goroutine and a
// writer goroutine. Senders that find the writer idle write their frames
// themselves, with one non-blocking system call.
//
// # Sending and receiving
//
// [Transport.Send] queues an envelope and returns a [Receipt] that
// resolves when the peer's handler has taken it, or with the reason it
// never will; [Transport.Post] is Send for callers that never look at the
// receipt. One [Handler] per stream receives envelopes, on the reader
// goroutine when the stream is idle (a blocked handler is relieved: another
// goroutine takes over reading) or on the stream's deliverer otherwise;
// its return gives the credit back. A sender about to send many envelopes
// at once (the replication loop answering a batch) opens a hold
// ([Transport.Hold], the optional [Holder] interface): sends queue without
// a write until its release, which writes each peer's in one system call.
// [Endpoint] is what the layers above
// (membership, actors) program against; [MemNetwork] implements it in
// memory for their tests.
//
// # Sessions and resume
//
// A session lives as long as both processes do (same incarnations). Each
// side keeps the frames it wrote until the peer credits them; after a
// broken connection the side that knows the other's address redials, and
// both rewrite from the byte the other stopped at. A peer that restarted
// fails what was pending with wire.ErrPeerRestarted; one unreachable past
// the resume grace, with wire.ErrPeerDead. Nobody dials a client (a peer
// without an address), so a client's session ends when the client says
// goodbye or stays away past the grace, and is then forgotten: sends to
// that client fail with wire.ErrPeerDead, and a client that connects
// again starts a session afresh.
//
// # Sockets
//
// On Linux, plain TCP connections are read and written with raw system
// calls through [syscall.RawConn] (rawio_linux.go), in every build: race
// builds add the race detector's annotations, so the race tests run the
// path that ships.
package transport
