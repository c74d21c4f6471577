package persistence

import (
	"bytes"
	"context"
	"sort"
	"sync"
)

// MemoryStore is a [Store] in memory, for tests of the code around the
// store. It runs the same revision logic and the same encoding and decoding
// as [PebbleStore] (every record is encoded on save and decoded on load), so
// a test against it catches encoding bugs and shares nothing with the
// caller; it only forgets everything when dropped, and never fails a write.
type MemoryStore struct {
	*core
	mem *memKV
}

var _ Store = (*MemoryStore)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *MemoryStore {
	mem := &memKV{data: make(map[string][]byte)}
	c := newCore(mem)
	if err := c.open(context.Background()); err != nil {
		panic(err) // cannot happen: the map is empty and writes to it do not fail
	}
	return &MemoryStore{core: c, mem: mem}
}

// memKV is a sorted-on-demand map; values are copied in and out.
type memKV struct {
	mu   sync.RWMutex
	data map[string][]byte
}

func (m *memKV) get(_ context.Context, key []byte) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.data[string(key)]
	if !ok {
		return nil, errNoKey
	}
	return bytes.Clone(v), nil
}

func (m *memKV) commit(_ context.Context, ops []op) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range ops {
		if o.del {
			delete(m.data, string(o.key))
		} else {
			m.data[string(o.key)] = bytes.Clone(o.value)
		}
	}
	return nil
}

func (m *memKV) limits() kvLimits { return kvLimits{MaxBytes: maxCommitBytes} }

func (m *memKV) scan(_ context.Context, lower, upper []byte, fn func(key, value []byte) error) error {
	return m.scanOrdered(lower, upper, false, fn)
}

func (m *memKV) scanReverse(_ context.Context, lower, upper []byte, fn func(key, value []byte) error) error {
	return m.scanOrdered(lower, upper, true, fn)
}

func (m *memKV) scanOrdered(lower, upper []byte, reverse bool, fn func(key, value []byte) error) error {
	type pair struct{ k, v []byte }
	var pairs []pair
	m.mu.RLock()
	for k, v := range m.data {
		if k >= string(lower) && k < string(upper) {
			pairs = append(pairs, pair{[]byte(k), bytes.Clone(v)})
		}
	}
	m.mu.RUnlock()
	sort.Slice(pairs, func(i, j int) bool { return (bytes.Compare(pairs[i].k, pairs[j].k) < 0) != reverse })
	for _, p := range pairs {
		if err := fn(p.k, p.v); err != nil {
			return err
		}
	}
	return nil
}

func (m *memKV) close() error { return nil }
