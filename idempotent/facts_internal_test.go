package idempotent

import (
	"reflect"
	"testing"
)

// The fact cache holds no pointer, so that the garbage collector never
// scans it: neither its slots nor its index's keys and values.
func TestFactCacheHoldsNoPointers(t *testing.T) {
	c := NewFactCache(4)
	for _, typ := range []reflect.Type{
		reflect.TypeOf(c.slots).Elem(),
		reflect.TypeOf(c.index).Key(),
		reflect.TypeOf(c.index).Elem(),
	} {
		if hasPointers(typ) {
			t.Errorf("%v holds a pointer: every collection would scan the cache", typ)
		}
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	default: // strings, slices, maps, pointers, interfaces, channels, funcs
		return true
	}
}

// Two entities whose index keys collide (the first 8 bytes of their ids'
// SHA-256, once in 2^64 pairs by chance, or made to collide) evict each
// other and never answer for each other. The collision is planted: b's
// index key is made to point at a's slot.
func TestFactCacheIndexCollisionEvicts(t *testing.T) {
	const hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	const hashB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	c := NewFactCache(4)
	c.Learn("a", hashA, true)
	c.index[indexKey(factKey("b"))] = c.index[indexKey(factKey("a"))]
	if f, ok := c.Get("b"); ok {
		t.Fatalf("b, colliding with a, was answered with a's fact %v", f.Hash())
	}
	c.Learn("b", hashB, false)
	if f, ok := c.Get("b"); !ok || !f.Matches(hashB) || f.Done {
		t.Errorf("b after it was learned: %v, %v; want its own hash, not done", f.Hash(), ok)
	}
	if f, ok := c.Get("a"); ok {
		t.Errorf("a, replaced by b, was answered with %v", f.Hash())
	}
	if n := len(c.slots); n != 1 {
		t.Errorf("%d slots after a collision, want 1: b took a's", n)
	}
}
