// Package fault holds the errors that the runtime and routing report and
// that package actor re-exports, so that routing can match and carry them
// without importing the typed API. The values are actor's: errors.Is
// against actor.ErrX holds for the same errors.
package fault
