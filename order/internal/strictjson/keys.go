// Package strictjson rejects what encoding/json accepts silently in an
// object's keys: a repeated key (the last wins) and a key that matches a
// field only case-insensitively. It checks a body after encoding/json
// decoded it, so that what the program decoded is what every JSON reader
// sees in the same bytes.
//
// encoding/json/v2 rejects both by default; this package exists until v2 is
// the standard, and nothing outside package order depends on it, so that it
// can then be deleted with one import. It is safe for concurrent use.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// KeyError is an object key CheckKeys rejects.
type KeyError struct {
	Path    string // the key's path, as "lines[0].sku" (the root's keys bare)
	Problem string
}

func (e *KeyError) Error() string { return e.Path + ": " + e.Problem }

// schema is the JSON shape of a struct type: its fields' exact names and,
// for each, the schema of the objects its value holds (nil: none, or a
// type that decodes itself, such as time.Time). Embedded structs, whose
// fields encoding/json promotes, are not modelled: no type of the wire
// contract has one.
type schema struct {
	names    []string
	children []*schema
}

var schemas sync.Map // reflect.Type -> *schema

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// schemaOf returns the schema of the objects a value of type t holds: t's
// own if t is a struct, its elements' if t is a slice, array or pointer. It
// is built once per type and then shared read-only; safe for concurrent use.
func schemaOf(t reflect.Type) *schema {
	if s, ok := schemas.Load(t); ok {
		return s.(*schema)
	}
	s := buildSchema(t, map[reflect.Type]*schema{})
	actual, _ := schemas.LoadOrStore(t, s)
	return actual.(*schema)
}

// buildSchema builds the schema of t; building holds the structs being
// built, so that a recursive type refers to itself instead of looping.
func buildSchema(t reflect.Type, building map[reflect.Type]*schema) *schema {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	if s, ok := building[t]; ok {
		return s
	}
	s := &schema{}
	building[t] = s
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.names = append(s.names, name)
		s.children = append(s.children, buildSchema(f.Type, building))
	}
	return s
}

// keyScanner walks a well-formed JSON text (one that encoding/json just
// decoded) and checks the keys of every object. It allocates only to build
// an error and to unescape a key that contains an escape.
type keyScanner struct {
	b []byte
	i int
}

// CheckKeys reports the first object key in body that repeats a key of its
// object or that matches a field of the struct it decodes into only
// case-insensitively, as a *KeyError naming the key. v is what body was
// decoded into. body must be well-formed JSON.
func CheckKeys(body []byte, v any) error {
	var steps [maxTrackedDepth]pathStep
	sc := keyScanner{b: body}
	return sc.value(schemaOf(reflect.TypeOf(v)), steps[:0])
}

// pathStep is one step of the JSON path of the value being scanned: the key
// of an object, as the offsets of its quoted text in the body (end > 0), or
// the index of an array element. It holds no pointer, so the path lives on
// the stack.
type pathStep struct {
	start, end int
	index      int
}

// maxTrackedDepth is how deep the scanner tracks the path without
// allocating; the contract's deepest value, lines[i].sku, is at depth 2.
const maxTrackedDepth = 8

// pathString returns the path as KeyError.Path spells it,
// "lines[1].sku", ending with the key last.
func (sc *keyScanner) pathString(steps []pathStep, last string) string {
	var b strings.Builder
	for _, st := range steps {
		if st.end == 0 {
			b.WriteString("[" + strconv.Itoa(st.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(unquote(sc.b[st.start:st.end]))
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(last)
	return b.String()
}

func (sc *keyScanner) skipSpace() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// value scans one value whose objects have schema s; path leads to it.
func (sc *keyScanner) value(s *schema, path []pathStep) error {
	sc.skipSpace()
	if sc.i >= len(sc.b) {
		return nil
	}
	switch sc.b[sc.i] {
	case '{':
		return sc.object(s, path)
	case '[':
		sc.i++
		for n := 0; ; n++ {
			sc.skipSpace()
			if sc.i >= len(sc.b) {
				return nil
			}
			if sc.b[sc.i] == ']' {
				sc.i++
				return nil
			}
			if sc.b[sc.i] == ',' {
				sc.i++
			}
			if err := sc.value(s, append(path, pathStep{index: n})); err != nil {
				return err
			}
		}
	case '"':
		sc.str()
	default: // a number, true, false or null
		for sc.i < len(sc.b) {
			switch sc.b[sc.i] {
			case ' ', '\t', '\n', '\r', ',', ']', '}':
				return nil
			}
			sc.i++
		}
	}
	return nil
}

// maxTrackedKeys is how many keys of one object are compared on the stack;
// an object with more (none of the contract's has) spills to the heap.
const maxTrackedKeys = 16

// object scans an object whose schema is s (nil: not a struct's); path
// leads to it.
func (sc *keyScanner) object(s *schema, path []pathStep) error {
	sc.i++ // '{'
	var stack [maxTrackedKeys][]byte
	seen := stack[:0]
	for {
		sc.skipSpace()
		if sc.i >= len(sc.b) {
			return nil
		}
		switch sc.b[sc.i] {
		case '}':
			sc.i++
			return nil
		case ',':
			sc.i++
			continue
		}
		start := sc.i
		sc.str()
		end := sc.i
		key := unquote(sc.b[start:end])
		for _, k := range seen {
			if bytes.Equal(k, key) {
				return &KeyError{Path: sc.pathString(path, string(key)), Problem: fmt.Sprintf("duplicate key %q", key)}
			}
		}
		seen = append(seen, key)
		var child *schema
		if s != nil {
			j := s.index(key)
			if j < 0 {
				return s.misspelt(key, sc.pathString(path, ""))
			}
			child = s.children[j]
		}
		sc.skipSpace()
		if sc.i < len(sc.b) && sc.b[sc.i] == ':' {
			sc.i++
		}
		if err := sc.value(child, append(path, pathStep{start: start, end: end})); err != nil {
			return err
		}
	}
}

// index returns the field whose name is exactly key, or -1.
func (s *schema) index(key []byte) int {
	for j, n := range s.names {
		if string(key) == n {
			return j
		}
	}
	return -1
}

// misspelt returns the error for a key that is no field's exact name
// (encoding/json matched it to a field case-insensitively) in the object at
// parent, a path that ends with "." unless it is the root.
func (s *schema) misspelt(key []byte, parent string) error {
	for _, n := range s.names {
		if strings.EqualFold(string(key), n) {
			return &KeyError{Path: parent + n, Problem: fmt.Sprintf("key %q must be spelled %q", key, n)}
		}
	}
	return &KeyError{Path: parent + string(key), Problem: fmt.Sprintf("key %q is not a field", key)}
}

// unquote returns the unescaped bytes of the quoted JSON string raw: a
// sub-slice of raw when it has no escape.
func unquote(raw []byte) []byte {
	if len(raw) < 2 {
		return raw
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return inner
	}
	return []byte(s)
}

// str scans a string starting at its opening quote.
func (sc *keyScanner) str() {
	sc.i++ // '"'
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case '\\':
			sc.i += 2
			continue
		case '"':
			sc.i++
			return
		}
		sc.i++
	}
}
