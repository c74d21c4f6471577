package protocol

import (
	"encoding/binary"
	"math/bits"
)

// Route is the shard index of partitionKey among shardCount shards
// (docs/protocol.md §2): murmur3 x86 32-bit of the UTF-8 key, rejection-sampled so
// that every shard is equally likely whatever shardCount is. Every client
// language reproduces it bit for bit (testdata/routing-vectors.json).
// Route panics if shardCount < 1: there is nowhere to route to.
func Route(partitionKey string, shardCount int) int {
	if shardCount < 1 {
		panic("protocol.Route: shardCount must be positive")
	}
	n := uint64(shardCount)
	limit := (1 << 32) - (1<<32)%n
	key := []byte(partitionKey)
	var seed uint32
	var attempt [4]byte
	for a := uint32(1); ; a++ {
		h := uint64(Murmur3(key, seed))
		if h < limit {
			return int(h % n)
		}
		binary.LittleEndian.PutUint32(attempt[:], a)
		seed = Murmur3(attempt[:], 0)
	}
}

// Murmur3 is MurmurHash3 x86 32-bit of data with seed.
func Murmur3(data []byte, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	n := len(data) / 4 * 4
	for i := 0; i < n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch len(data) & 3 {
	case 3:
		k ^= uint32(data[n+2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[n+1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[n])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(len(data))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
