package cluster

import (
	"hash/fnv"
	"slices"
)

// Replica is one live coordinator replica as its registration key says.
type Replica struct {
	// ID is unique among live replicas.
	ID string `json:"id"`
	// AdvertiseURL is where clients and other replicas reach its HTTP API.
	AdvertiseURL string `json:"advertiseUrl"`
}

// weight is the rendezvous score of unit on replica: a 64-bit hash of both,
// mixed so that similar ids spread.
func weight(replicaID, unit string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(replicaID))
	h.Write([]byte{0})
	h.Write([]byte(unit))
	x := h.Sum64()
	// splitmix64 finaliser: fnv's low bits alone are poorly mixed.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Owner is the replica that should own unit: the one with the highest
// rendezvous weight (ties broken by the smaller id). When a replica leaves,
// only its units move; when one joins, it takes about 1/n of the units.
// ok is false when replicas is empty.
func Owner(unit string, replicas []Replica) (owner Replica, ok bool) {
	var best uint64
	for _, r := range replicas {
		w := weight(r.ID, unit)
		if !ok || w > best || (w == best && r.ID < owner.ID) {
			owner, best, ok = r, w, true
		}
	}
	return owner, ok
}

// Plan is what replica self should do so that it owns exactly the units
// placed on it: claim the placed units it does not hold, release the held
// units placed elsewhere. units and held may overlap and contain
// duplicates; both results are sorted and free of duplicates.
func Plan(self string, units, held []string, replicas []Replica) (claim, release []string) {
	holds := map[string]bool{}
	for _, u := range held {
		holds[u] = true
	}
	seen := map[string]bool{}
	for _, u := range append(slices.Clone(units), held...) {
		if seen[u] {
			continue
		}
		seen[u] = true
		owner, ok := Owner(u, replicas)
		mine := ok && owner.ID == self
		switch {
		case mine && !holds[u]:
			claim = append(claim, u)
		case !mine && holds[u]:
			release = append(release, u)
		}
	}
	slices.Sort(claim)
	slices.Sort(release)
	return claim, release
}
