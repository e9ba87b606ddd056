module github.com/troupe-go/troupe

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/klauspost/compress v1.20.4
	github.com/vmihailenco/msgpack/v5 v5.4.1
	go.uber.org/goleak v1.3.0
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/stretchr/testify v1.11.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)
