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

// decodeVec reads encodeVec's bytes into dst (reused when big enough).
func decodeVec(b []byte, dst []float32) []float32 {
	n := len(b) / 4
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return dst
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

// dot is the cosine of two unit vectors.
func dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	n := min(len(a), len(b))
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// dotBytes is dot with b still encoded, sparing a decode per candidate.
func dotBytes(a []float32, b []byte) float32 {
	var s float32
	n := min(len(a), len(b)/4)
	for i := 0; i < n; i++ {
		s += a[i] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return s
}
