package model

import (
	"math/bits"
	"sync"
)

// Reused encoding buffers. Every operation on a large state writes its
// canonical bytes into a new buffer of the state's size (the hash is over
// all of them), and a fresh one of 1 MB cost more to allocate and clear,
// and in the collections it drove, than to fill. An encoding no one holds
// any more (canon.release) gives its buffer back here, and the next
// encoding of about that size takes it.

// pooledMinBytes is the smallest buffer pooled: below it, allocating is
// cheaper than a pool's round trip. A variable so that the package's tests
// can send their small states through the pool too.
var pooledMinBytes = 64 << 10

// classSteps is how many size classes each power of two is cut into, so
// that a buffer is at most a quarter larger than asked for (the kept bytes
// are held as long as their state).
const classSteps = 4

// bufferPools holds the free buffers by size class; a class's buffers are
// all of its size (classBytes).
var bufferPools [64 * classSteps]sync.Pool

// classOf is the smallest class whose size is at least n.
func classOf(n int) int {
	top := bits.Len(uint(n-1)) - 1 // 2^top < n <= 2^(top+1)
	step := 1 << top / classSteps
	for s := 1; s <= classSteps; s++ {
		if n <= 1<<top+s*step {
			return top*classSteps + s - 1
		}
	}
	return (top + 1) * classSteps
}

// classBytes is the size of the buffers of class c.
func classBytes(c int) int {
	top, s := c/classSteps, c%classSteps+1
	return 1<<top + s*(1<<top/classSteps)
}

// getBuffer returns an empty buffer of capacity at least n: a pooled one
// for a large n, else a new one.
func getBuffer(n int) []byte {
	if n < pooledMinBytes {
		return make([]byte, 0, n)
	}
	c := classOf(n)
	if b, ok := bufferPools[c].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, classBytes(c))
}

// putBuffer gives b back for reuse. The caller must hold the only
// reference to it.
func putBuffer(b []byte) {
	if cap(b) < pooledMinBytes {
		return
	}
	c := classOf(cap(b))
	if classBytes(c) != cap(b) {
		return // not one of getBuffer's (appends outgrew it)
	}
	b = b[:0]
	bufferPools[c].Put(&b)
}
