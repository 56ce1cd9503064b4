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
