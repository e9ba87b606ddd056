package lincheck

import (
	"os"

	"github.com/anishathalye/porcupine"
)

// Draw writes porcupine's drawing of a checked history to a new HTML file
// in the temporary directory, named after pattern as os.CreateTemp names
// files, and returns the file's name: the place to look when a check
// failed.
func Draw[K comparable](info porcupine.LinearizationInfo, pattern string) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", err
	}
	if err := porcupine.Visualize(Model[K](), info, f); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), f.Close()
}
