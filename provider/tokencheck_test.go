package provider

import (
	"encoding/binary"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestRememberedTokensBounded: the remembered tokens start over at
// rememberedMax, so a flood of distinct tokens cannot grow them without
// bound, and a forgotten token is looked up again.
func TestRememberedTokensBounded(t *testing.T) {
	m := &rememberedTokens{entries: map[[32]byte]airlock.Token{}}
	hash := func(i int) []byte {
		h := make([]byte, 32)
		binary.BigEndian.PutUint64(h, uint64(i))
		return h
	}
	for i := range rememberedMax + 10 {
		m.put(airlock.Token{ID: "tok", Hash: hash(i)})
		if len(m.entries) > rememberedMax {
			t.Fatalf("%d tokens remembered, at most %d", len(m.entries), rememberedMax)
		}
	}
	last := hash(rememberedMax + 9)
	if _, ok := m.get(last); !ok {
		t.Error("the last token put is not remembered")
	}
	m.forget(last)
	if _, ok := m.get(last); ok {
		t.Error("a forgotten token is still remembered")
	}
	m.put(airlock.Token{ID: "short", Hash: []byte("short")})
	if _, ok := m.get([]byte("short")); ok {
		t.Error("a hash that is not SHA-256 was remembered")
	}
}
