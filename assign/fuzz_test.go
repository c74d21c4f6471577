package assign

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// bytesSource is a rand.Source that reads the fuzzer's input: every choice
// of the simulation (which member joins, crashes, loses an answer, how the
// layout changes) comes from the bytes, so coverage guides the fuzzer
// through the state machine. Past the input's end it falls back to a fixed
// generator, so that every input runs a whole simulation.
type bytesSource struct {
	data []byte
	rest *rand.PCG
}

func (s *bytesSource) Uint64() uint64 {
	if len(s.data) >= 8 {
		v := binary.LittleEndian.Uint64(s.data)
		s.data = s.data[8:]
		return v
	}
	return s.rest.Uint64()
}

// FuzzOperations runs the simulation of sim_test.go — joins, leaves,
// crashes, hangs, lost answers, layout changes — with choices from the
// input, checking every invariant after every step: no shard read by two
// members, the coordinator knows what every member reads, epochs never go
// back, CheckInvariants empty, Persist honest, and convergence afterwards.
func FuzzOperations(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{1, 2, 3, 4, 5, 6, 7, 8},
		[]byte("join join crash lost layout leave"),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &bytesSource{data: data, rest: rand.NewPCG(uint64(len(data)), 7)}
		w := newWorldFrom(t, uint64(len(data)), rand.New(src))
		w.stats = map[string]int{}
		w.steps = 80
		if !w.run() {
			t.Fatalf("simulation failed for input %x", data)
		}
	})
}
