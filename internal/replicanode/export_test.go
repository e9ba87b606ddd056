package replicanode

// withManualTicks returns c with its timer replaced by ticks: the node
// ticks once for each value sent on it.
func withManualTicks(c Config, ticks <-chan struct{}) Config {
	c.ticks = ticks
	return c
}
