package protocol

import "strconv"

// StreamKey is the Redis key of shard index of the stream, "{prefix}:{index}".
func StreamKey(prefix string, index int) string {
	return prefix + ":" + strconv.Itoa(index)
}

// StreamKeyPattern is the key pattern producers show, e.g. "orders:{shardIndex}".
func StreamKeyPattern(prefix string) string {
	return prefix + ":{shardIndex}"
}

// RedisSlotCount is the number of hash slots in a Redis Cluster.
const RedisSlotCount = 16384

// RedisSlot is the Redis Cluster slot of key: CRC16/XMODEM of the key, or of
// its hash tag when it has a non-empty one, mod 16384.
func RedisSlot(key string) int {
	if start := indexByte(key, '{'); start >= 0 {
		if end := indexByte(key[start+1:], '}'); end > 0 {
			key = key[start+1 : start+1+end]
		}
	}
	return int(crc16XModem(key) % RedisSlotCount)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// crc16XModem is CRC-16/XMODEM (poly 0x1021, init 0), the checksum Redis
// Cluster uses for key slots. The standard library has no CRC-16.
func crc16XModem(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
