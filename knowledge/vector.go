package knowledge

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// encodeVec stores a vector as little-endian float32s.
func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// signBits is a vector's sign pattern, one bit per dimension: a 32×
// smaller sketch whose Hamming distance ranks candidates for the exact
// cosine on large indexes.
func signBits(v []float32) []byte {
	b := make([]byte, (len(v)+7)/8)
	for i, x := range v {
		if x > 0 {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}

// hamming counts the differing bits of two sketches of equal length.
func hamming(a, b []byte) int {
	n := 0
	i := 0
	for ; i+8 <= len(a); i += 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]))
	}
	for ; i < len(a); i++ {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

// dotBytes is the cosine of the unit vector a and the unit vector encoded
// in b (encodeVec), read in place: no decode per candidate.
func dotBytes(a []float32, b []byte) float32 {
	var s float32
	n := min(len(a), len(b)/4)
	for i := 0; i < n; i++ {
		s += a[i] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return s
}
