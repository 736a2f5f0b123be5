package model

// The property tests' states are a few kilobytes: pooling their buffers
// too puts every encoding they make through the reuse that large states
// get, where a buffer handed back while still held would show as a hash or
// a kept encoding that no longer matches its state.
func init() { pooledMinBytes = 256 }
