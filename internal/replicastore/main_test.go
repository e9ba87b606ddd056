package replicastore

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChild); dir != "" {
		runChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}
