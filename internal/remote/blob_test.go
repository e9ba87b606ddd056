package remote

import (
	"crypto/rand"
	"slices"

	"github.com/troupe-go/troupe/actor"
)

// noise returns n bytes that do not compress: the transport compresses
// what it can, and zeros would barely take the link.
func noise(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// blob takes messages of any size: it records the numbers it is told,
// answers the size of what it is asked with, and answers asks for a
// number of bytes with that many.
type blobMsg interface{ blobMsg() }

type blobPut struct {
	N   int
	Pad []byte
}

type blobList struct {
	actor.Reply[blobMsg, []int]
}

type blobEcho struct {
	actor.Reply[blobMsg, int]
	Pad []byte
}

// blobWait is answered with Size bytes once the ask's context ends.
type blobWait struct {
	actor.Reply[blobMsg, []byte]
	Size int
}

type blobGet struct {
	actor.Reply[blobMsg, []byte]
	Size int
}

func (blobPut) blobMsg()  {}
func (blobList) blobMsg() {}
func (blobEcho) blobMsg() {}
func (blobGet) blobMsg()  {}
func (blobWait) blobMsg() {}

var blob = actor.Define("blob", func(c *actor.Context[[]int, blobMsg], m blobMsg) error {
	switch m := m.(type) {
	case blobPut:
		c.SetState(append(slices.Clone(c.State()), m.N))
	case blobList:
		return actor.Respond(c, m, c.State())
	case blobEcho:
		return actor.Respond(c, m, len(m.Pad))
	case blobGet:
		return actor.Respond(c, m, noise(m.Size))
	case blobWait:
		<-c.Done()
		return actor.Respond(c, m, noise(m.Size))
	}
	return nil
}).WithMessages(blobPut{}, blobList{}, blobEcho{}, blobGet{}, blobWait{})
